"""Pre-training train step on one GPU with JAX: tokens per second and MFU.

Builds a `TupeMaskedLM` per position encoding at BERT-base dims, with
Keras' AdamW and global-norm clipping (the study's optimizer, without its
schedule), and compiles one train step each with `jax.jit` (the state
donated, as a training loop does): the masked-LM loss on synthetic batches
of full-length sequences (pre-training packs its sequences, so there is no
padding) with `--max_predictions` masked positions per sequence.

`--predict` adds each encoding's inference forward (the backbone alone,
`training=False`) as a case of its own. The name `keras-hub BERT` in
`--position_encodings` is keras-hub's own `BertMaskedLM` on `BertBackbone`,
the reference of `benchmarks/step_overhead.py`.

Rounds interleave the encodings in a shuffled order. The table gives, per
encoding, the median step time, tokens per second and model-FLOPs
utilisation (MFU): model FLOPs per step / step time / the chip's peak, and
the compiled program's device memory (XLA's own accounting: its
temporaries, the activations kept for the backward pass among them, plus
its inputs and outputs; the donated state counted once).
Model FLOPs are the same for every encoding (the usual count: 6 x the
matrix-multiply parameters per token, the attention products and the
masked-LM head over the predicted positions), so the encodings' extra work
shows as lower MFU; "ratio" is the per-round step time against `bert`,
median [min, max]. The kernel column says whether cuDNN's fused attention
runs (a `__cudnn$fmha` call in the compiled program) or XLA's.

    KERAS_BACKEND=jax python benchmarks/gpu_train_step.py  # BERT-base, 512
    KERAS_BACKEND=jax python benchmarks/gpu_train_step.py --num_layers=4 \
        --hidden_dim=512 --num_heads=8 --intermediate_dim=2048 --predict \
        --position_encodings="keras-hub BERT,bert,..."  # every encoding
    KERAS_BACKEND=jax python benchmarks/gpu_train_step.py --num_layers=2 \
        --hidden_dim=64 --num_heads=2 --intermediate_dim=128 \
        --seq_length=32 --batch_size=2 --vocabulary_size=512 \
        --max_predictions=5 --rounds=2 --steps_per_round=1 --peak_tflops=1

`--profile_dir` also writes, per encoding, a Perfetto trace of a few steps
and the compiled program's HLO, and prints its costliest kernels.
"""

import collections
import concurrent.futures
import gzip
import json
import os
import pathlib
import re
import time

os.environ.setdefault("KERAS_BACKEND", "jax")

import harness  # noqa: E402
import jax  # noqa: E402
import keras  # noqa: E402
import keras_hub  # noqa: E402
import numpy as np  # noqa: E402
from absl import app  # noqa: E402
from absl import flags  # noqa: E402
from keras import ops  # noqa: E402
from model_dims import backbone_dims  # noqa: E402
from model_dims import define_model_dims  # noqa: E402
from model_dims import describe_dims  # noqa: E402
from model_dims import model_dims  # noqa: E402

import tupe_tf  # noqa: E402

FLAGS = harness.define_round_flags(rounds=9, steps_per_round=10)
define_model_dims("base", seq_length=512, batch_size=32)
flags.DEFINE_list(
    "position_encodings",
    ["bert", "tupe-r", "rope", "diet-rel"],
    "Position encodings to measure; the first is the ratios' reference.",
)
flags.DEFINE_bool("predict", False, "Also time the inference forward.")
flags.DEFINE_string("dtype", "mixed_bfloat16", "Keras dtype policy.")
flags.DEFINE_float("dropout", 0.0, "Dropout of the backbone.")
flags.DEFINE_integer(
    "max_predictions", 76, "Masked positions per sequence (15% of 512)."
)
flags.DEFINE_float(
    "peak_tflops",
    989.0,
    "The chip's dense peak in TFLOP/s for --dtype's matrix multiplies "
    "(H100 SXM and H200: 989 for bfloat16).",
)
flags.DEFINE_string("profile_dir", None, "Write traces and HLO here.")
flags.DEFINE_string(
    "output",
    None,
    "Raw JSON file to write: the harness's record (command, machine, date, "
    "flags, every round's timings), the table, each encoding's attention "
    "kernel and device megabytes.",
)

KERAS_HUB = "keras-hub BERT"
FUSED_ATTENTION = re.compile(r'custom_call_target="__cudnn\$fmha[A-Za-z]*"')


def model_flops_per_step(dims):
    """Training FLOPs of one step: 3 x the forward's matrix multiplies."""
    h, n = dims["hidden_dim"], FLAGS.seq_length
    tokens = FLAGS.batch_size * n
    predictions = FLAGS.batch_size * FLAGS.max_predictions
    per_layer = 2 * (4 * h * h + 2 * h * dims["intermediate_dim"])
    per_layer += 4 * n * h  # q.k and probabilities.v
    head = 2 * (h * h + h * FLAGS.vocabulary_size)  # transform, logits
    return 3 * (tokens * dims["num_layers"] * per_layer + predictions * head)


def make_batch(rng):
    """Full-length sequences, `--max_predictions` masked positions each."""
    b, n, p = FLAGS.batch_size, FLAGS.seq_length, FLAGS.max_predictions
    positions = [
        np.sort(rng.choice(np.arange(1, n), p, False)) for _ in range(b)
    ]
    x = {
        "token_ids": rng.integers(5, FLAGS.vocabulary_size, (b, n)),
        "segment_ids": np.repeat((np.arange(n) >= n // 2)[None], b, 0),
        "padding_mask": np.ones((b, n)),
        "mask_positions": np.stack(positions),
    }
    x = {k: v.astype("int32") for k, v in x.items()}
    labels = rng.integers(5, FLAGS.vocabulary_size, (b, p)).astype("int32")
    return x, labels, np.ones((b, p), "float32")


def build(position_encoding):
    dims = dict(
        **backbone_dims(max_sequence_length=FLAGS.seq_length),
        dropout=FLAGS.dropout,
        dtype=FLAGS.dtype,
    )
    if position_encoding == KERAS_HUB:
        backbone = keras_hub.models.BertBackbone(**dims)
        model = keras_hub.models.BertMaskedLM(backbone, preprocessor=None)
    else:
        backbone = tupe_tf.TupeBackbone(
            **dims, position_encoding=position_encoding
        )
        model = tupe_tf.TupeMaskedLM(backbone, preprocessor=None)
    optimizer = keras.optimizers.AdamW(
        learning_rate=1e-4, weight_decay=0.01, epsilon=1e-6, global_clipnorm=1.0
    )
    optimizer.build(model.trainable_variables)
    return model, optimizer


def jitted_train_step(model, optimizer):
    """train_step(state, x, labels, weights) -> (loss, state), state donated."""

    def loss_fn(trainable, non_trainable, x, labels, weights):
        logits, non_trainable = model.stateless_call(
            trainable, non_trainable, x, training=True
        )
        losses = keras.losses.sparse_categorical_crossentropy(
            labels, ops.cast(logits, "float32"), from_logits=True
        )
        return ops.sum(losses * weights) / ops.sum(weights), non_trainable

    gradient = jax.value_and_grad(loss_fn, has_aux=True)

    def train_step(state, x, labels, weights):
        trainable, non_trainable, optimizer_variables = state
        (loss, non_trainable), grads = gradient(
            trainable, non_trainable, x, labels, weights
        )
        trainable, optimizer_variables = optimizer.stateless_apply(
            optimizer_variables, grads, trainable
        )
        return loss, (trainable, non_trainable, optimizer_variables)

    return jax.jit(train_step, donate_argnums=0)


def jitted_predict(backbone):
    """predict(state, x) -> the backbone's sequence output, inference mode."""

    def predict(state, x):
        trainable, non_trainable = state
        inputs = {k: v for k, v in x.items() if k != "mask_positions"}
        outputs, _ = backbone.stateless_call(
            trainable, non_trainable, inputs, training=False
        )
        return outputs["sequence_output"]

    return jax.jit(predict)


def device_megabytes(program):
    """The compiled program's device memory by XLA's accounting."""
    stats = program.memory_analysis()
    total = (
        stats.temp_size_in_bytes
        + stats.argument_size_in_bytes
        + stats.output_size_in_bytes
        - stats.alias_size_in_bytes
    )
    return total / 2**20


class Candidate:
    """One encoding's compiled train step and its state between rounds."""

    def __init__(self, position_encoding, batch):
        model, optimizer = build(position_encoding)
        self.state = (
            [v.value for v in model.trainable_variables],
            [v.value for v in model.non_trainable_variables],
            [v.value for v in optimizer.variables],
        )
        self.batch = batch
        self.lowered = jitted_train_step(model, optimizer).lower(
            self.state, *batch
        )
        self.predict_lowered = None
        if FLAGS.predict:
            backbone = model.backbone
            # Copies: the train step donates (deletes) the state it gets.
            self.predict_state = (
                [jax.numpy.copy(v.value) for v in backbone.trainable_variables],
                [
                    jax.numpy.copy(v.value)
                    for v in backbone.non_trainable_variables
                ],
            )
            self.predict_lowered = jitted_predict(backbone).lower(
                self.predict_state, batch[0]
            )

    def compile(self):
        self.program = self.lowered.compile()
        self.hlo = self.program.as_text()
        self.kernel = "cuDNN" if FUSED_ATTENTION.search(self.hlo) else "XLA"
        self.megabytes = device_megabytes(self.program)
        if self.predict_lowered is not None:
            self.predict_program = self.predict_lowered.compile()
            self.predict_megabytes = device_megabytes(self.predict_program)

    def step(self):
        loss, self.state = self.program(self.state, *self.batch)
        return loss

    def predict(self):
        return self.predict_program(self.predict_state, self.batch[0])

    def timed_predict_round(self):
        return harness.time_steps(
            self.predict, FLAGS.steps_per_round, jax.block_until_ready
        )

    def run(self, steps):
        """Runs `steps` steps; refuses a non-finite loss."""
        for _ in range(steps):
            loss = self.step()
        if not np.isfinite(float(loss)):
            raise FloatingPointError(f"non-finite loss {loss}")

    def timed_round(self):
        timing = harness.time_steps(
            self.step, FLAGS.steps_per_round, jax.block_until_ready
        )
        self.run(1)
        return timing


def compile_candidates(batch):
    candidates = {n: Candidate(n, batch) for n in FLAGS.position_encodings}
    # XLA compiles outside the GIL: one thread per program.
    with concurrent.futures.ThreadPoolExecutor(len(candidates)) as pool:
        list(pool.map(Candidate.compile, candidates.values()))
    for candidate in candidates.values():
        candidate.run(2)  # warm up
    return candidates


def profile(name, candidate):
    """Writes a trace of 3 steps and the HLO; prints the costliest kernels."""
    directory = pathlib.Path(FLAGS.profile_dir)
    directory.mkdir(parents=True, exist_ok=True)
    trace_dir = directory / f"trace_{name}"
    with jax.profiler.trace(str(trace_dir), create_perfetto_trace=True):
        candidate.run(3)
    for trace in sorted(trace_dir.rglob("perfetto_trace.json.gz"))[-1:]:
        (directory / f"{name}.trace.json.gz").write_bytes(trace.read_bytes())
        print_costliest_kernels(name, trace)
    with gzip.open(directory / f"{name}.hlo.txt.gz", "wt") as f:
        f.write(candidate.hlo)


def print_costliest_kernels(name, trace_path, top=25):
    """The device kernels of the trace, summed by name, costliest first."""
    with gzip.open(trace_path, "rt") as f:
        events = json.load(f)
    events = events.get("traceEvents", events)
    device = {
        e["pid"]
        for e in events
        if e.get("name") == "process_name"
        and "GPU" in e["args"].get("name", "")
    }
    totals = collections.Counter()
    for e in events:
        if e.get("ph") == "X" and (not device or e.get("pid") in device):
            totals[e.get("name", "?")[:90]] += e.get("dur", 0)
    total = sum(totals.values()) or 1
    print(
        f"\n{name}: costliest kernels over 3 steps ({total / 3e3:.1f} ms/step)"
    )
    for kernel, dur in totals.most_common(top):
        print(f"  {dur / 3e3:8.2f} ms/step {100 * dur / total:5.1f}%  {kernel}")


def table_rows(candidates, samples, flops):
    reference = FLAGS.position_encodings[0]
    tokens = FLAGS.batch_size * FLAGS.seq_length
    peak = FLAGS.peak_tflops * 1e12
    rows = []
    for name, candidate in candidates.items():
        summary = harness.summarize(samples[name], samples[reference])
        step = summary.wall.median
        row = [
            name,
            candidate.kernel,
            f"{step * 1e3:.1f}",
            f"{tokens / step:,.0f}",
            f"{100 * flops / step / peak:.1f}%",
            summary.wall_ratio.format(".3f"),
            f"{candidate.megabytes:,.0f}",
        ]
        if FLAGS.predict:
            forward = harness.summarize(
                samples[f"{name} predict"], samples[f"{reference} predict"]
            )
            row += [
                f"{forward.wall.median * 1e3:.2f}",
                forward.wall_ratio.format(".3f"),
                f"{candidate.predict_megabytes:,.0f}",
            ]
        rows.append(row)
    return rows


def matmul_tflops():
    """Achieved bf16 TFLOP/s of an 8192^3 matrix product on this chip."""
    a = jax.random.normal(jax.random.key(0), (8192, 8192), "bfloat16")
    product = jax.jit(lambda x: x @ x)
    jax.block_until_ready(product(a))  # compile outside the timing
    timing = harness.time_steps(lambda: product(a), 10, jax.block_until_ready)
    return 2 * 8192**3 / timing.wall / 1e12


def main(_):
    if keras.backend.backend() != "jax":
        raise app.UsageError("Runs on JAX only: set KERAS_BACKEND=jax.")
    device = jax.devices()[0].device_kind
    print(f"{device}; jax {jax.__version__}, keras {keras.__version__}")
    start = time.perf_counter()
    candidates = compile_candidates(make_batch(np.random.default_rng(0)))
    print(f"compiled in {time.perf_counter() - start:.0f} s", flush=True)
    cases = {n: c.timed_round for n, c in candidates.items()}
    if FLAGS.predict:
        for name, candidate in candidates.items():
            candidate.predict()  # warm up
            cases[f"{name} predict"] = candidate.timed_predict_round
    samples = harness.run_rounds(cases, FLAGS.rounds)
    flops = model_flops_per_step(model_dims())
    text = harness.print_table(
        f"dims {describe_dims()}, predictions={FLAGS.max_predictions}, "
        f"{FLAGS.dtype}, dropout={FLAGS.dropout}; "
        f"{flops / 1e12:.2f} model TFLOP/step; rounds={FLAGS.rounds}x"
        f"{FLAGS.steps_per_round} steps; {device}, 8192^3 bf16 matmul "
        f"{matmul_tflops():.0f} TFLOP/s",
        header(),
        table_rows(candidates, samples, flops),
        align=[None] * 2 + ["right"] * (len(header()) - 2),
    )
    harness.write_json(
        FLAGS.output,
        samples,
        device=device,
        table=text,
        attention={n: c.kernel for n, c in candidates.items()},
        megabytes={n: c.megabytes for n, c in candidates.items()},
        predict_megabytes={
            n: c.predict_megabytes
            for n, c in candidates.items()
            if FLAGS.predict
        },
    )
    if FLAGS.profile_dir:
        for name, candidate in candidates.items():
            profile(name, candidate)


def header():
    columns = [
        "position encoding",
        "attention",
        "step ms",
        "tokens/s",
        "MFU",
        "step / reference",
        "train MB",
    ]
    if FLAGS.predict:
        columns += ["predict ms", "predict / reference", "predict MB"]
    return columns


if __name__ == "__main__":
    app.run(main)
