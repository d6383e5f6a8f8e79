"""Fused vs explicit biased attention on JAX: forward and train-step time.

On JAX `BiasedMultiHeadAttention` runs `keras.ops.dot_product_attention`
(cuDNN's fused kernel where JAX takes it, XLA's implementation elsewhere)
wherever `use_fused_attention` allows. This script builds one
`TupeBackbone` per position encoding and dtype (dropout 0, so the train
step may fuse too), compiles a jitted forward (`training=False`) and a
jitted train step (mean square of `sequence_output`, its gradient and an
SGD update) twice: as the rule says, and with the rule forced to the
explicit float32 path. Rounds interleave the four in a shuffled order; the
table gives median per-step times and the median and min-max of the
per-round ratio explicit / fused (above 1: the fused path is faster).
The kernel column names what the fused program's optimised HLO calls:
cuDNN (a `__cudnn$fmha` custom call, forward and backward counted) or XLA.
`--output` gets the harness's JSON record (command, machine, date, flags,
every round's timings per model, kernels, the table), rewritten after each
model.

    KERAS_BACKEND=jax python benchmarks/fused_attention.py   # BERT-base dims
    KERAS_BACKEND=jax python benchmarks/fused_attention.py --num_layers=2 \
        --hidden_dim=64 --num_heads=2 --intermediate_dim=128 --seq_length=32 \
        --batch_size=2 --vocabulary_size=512 --rounds=1 --steps_per_round=1
"""

import concurrent.futures
import contextlib
import os
import re
import time

os.environ.setdefault("KERAS_BACKEND", "jax")

import harness  # noqa: E402
import jax  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402
from absl import app  # noqa: E402
from absl import flags  # noqa: E402
from keras import ops  # noqa: E402
from model_dims import backbone_dims  # noqa: E402
from model_dims import define_model_dims  # noqa: E402
from model_dims import describe_dims  # noqa: E402

import tupe_tf  # noqa: E402
from tupe_tf.layers import biased_multi_head_attention  # noqa: E402
from tupe_tf.utils.markdown import markdown_table  # noqa: E402

FLAGS = harness.define_round_flags(rounds=9, steps_per_round=5)
define_model_dims("base", seq_length=512, batch_size=16)
flags.DEFINE_list(
    "position_encodings",
    ["tupe-r", "diet-rel", "alibi"],
    "Position encodings to measure (with an attention bias: without one, "
    "the explicit path runs on every backend).",
)
flags.DEFINE_list(
    "dtypes", ["mixed_bfloat16", "float32"], "Keras dtype policies."
)
flags.DEFINE_string(
    "output", None, "Raw JSON file to write, rewritten after each model."
)

LEARNING_RATE = 1e-4
STEPS = ("forward", "train step")
FUSED_KERNEL = re.compile(r'custom_call_target="(__cudnn\$fmha[A-Za-z]*)"')


@contextlib.contextmanager
def attention_path(fused):
    """Traces under the layer's rule (`fused`) or with it forced off."""
    rule = biased_multi_head_attention.use_fused_attention
    if not fused:
        biased_multi_head_attention.use_fused_attention = lambda *_: False
    try:
        yield
    finally:
        biased_multi_head_attention.use_fused_attention = rule


def make_inputs(rng):
    """BERT inputs; half the batch padded from a random length on."""
    n, b = FLAGS.seq_length, FLAGS.batch_size
    lengths = np.where(np.arange(b) % 2, rng.integers(n // 2, n + 1, b), n)
    return {
        "token_ids": rng.integers(5, FLAGS.vocabulary_size, (b, n)).astype(
            "int32"
        ),
        "segment_ids": (np.arange(n)[None, :] >= n // 2)
        .repeat(b, 0)
        .astype("int32"),
        "padding_mask": (np.arange(n)[None, :] < lengths[:, None]).astype(
            "int32"
        ),
    }


def build(position_encoding, dtype):
    return tupe_tf.TupeBackbone(
        **backbone_dims(),
        position_encoding=position_encoding,
        dropout=0.0,
        dtype=dtype,
    )


def step_functions(backbone):
    """Pure `forward` and `train step` of (trainable, non_trainable, x)."""

    def sequence_output(trainable, non_trainable, inputs, training):
        outputs, _ = backbone.stateless_call(
            trainable, non_trainable, inputs, training=training
        )
        return outputs["sequence_output"]

    def forward(trainable, non_trainable, inputs):
        return sequence_output(trainable, non_trainable, inputs, False)

    def loss(trainable, non_trainable, inputs):
        output = sequence_output(trainable, non_trainable, inputs, True)
        return ops.mean(ops.square(ops.cast(output, "float32")))

    def train_step(trainable, non_trainable, inputs):
        value, grads = jax.value_and_grad(loss)(
            trainable, non_trainable, inputs
        )
        return value, [
            t - LEARNING_RATE * g.astype(t.dtype)
            for t, g in zip(trainable, grads)
        ]

    return {"forward": forward, "train step": train_step}


def compile_programs(backbone, args):
    """{(step, fused): (compiled program, kernel)}; lowered one by one (the
    rule is patched while tracing), compiled in parallel."""
    lowered = {}
    for fused in (True, False):
        with attention_path(fused):
            for step, fn in step_functions(backbone).items():
                lowered[step, fused] = jax.jit(fn).lower(*args)
    for step in STEPS:
        if lowered[step, True].as_text() == lowered[step, False].as_text():
            raise RuntimeError(
                f"{step}: forcing the explicit path changed nothing."
            )
    with concurrent.futures.ThreadPoolExecutor(len(lowered)) as pool:
        futures = {k: pool.submit(v.compile) for k, v in lowered.items()}
        compiled = {k: f.result() for k, f in futures.items()}
    return {k: (c, kernel(c.as_text())) for k, c in compiled.items()}


def kernel(hlo_text):
    """'cuDNN (n <target>, ...)' if the HLO calls cuDNN's fused attention,
    else 'XLA'."""
    targets = FUSED_KERNEL.findall(hlo_text)
    if not targets:
        return "XLA"
    counts = {t: targets.count(t) for t in sorted(set(targets))}
    return "cuDNN (" + ", ".join(f"{n} {t}" for t, n in counts.items()) + ")"


def measure(position_encoding, dtype, inputs):
    """{(step, fused): per-round `Timing`s} and {step: fused kernel}."""
    backbone = build(position_encoding, dtype)
    args = (
        [v.value for v in backbone.trainable_variables],
        [v.value for v in backbone.non_trainable_variables],
        inputs,
    )
    programs = compile_programs(backbone, args)
    for program, _ in programs.values():
        jax.block_until_ready(program(*args))  # warm up

    def case(program):
        return lambda: harness.time_steps(
            lambda: program(*args),
            FLAGS.steps_per_round,
            finish=jax.block_until_ready,
        )

    cases = {key: case(program) for key, (program, _) in programs.items()}
    kernels = {step: programs[step, True][1] for step in STEPS}
    return harness.run_rounds(cases, FLAGS.rounds), kernels


def table_rows(position_encoding, dtype, samples, kernels):
    rows = []
    for step in STEPS:
        fused = harness.summarize(samples[step, True])
        explicit = harness.summarize(
            samples[step, False], reference=samples[step, True]
        )
        rows.append(
            [
                position_encoding,
                dtype,
                step,
                kernels[step],
                f"{fused.wall.median * 1e3:.2f}",
                f"{explicit.wall.median * 1e3:.2f}",
                explicit.wall_ratio.format(".2f"),
            ]
        )
    return rows


HEADER = [
    "position encoding",
    "dtype",
    "step",
    "fused kernel",
    "fused ms",
    "explicit ms",
    "explicit / fused [min, max]",
]
ALIGN = [None] * 4 + ["right"] * 3


def model_rows(position_encoding, dtype, inputs):
    """The table rows, samples and kernels of one backbone, its session
    cleared afterwards."""
    start = time.perf_counter()
    samples, kernels = measure(position_encoding, dtype, inputs)
    keras.backend.clear_session()
    print(
        f"{position_encoding} {dtype} done in "
        f"{time.perf_counter() - start:.0f} s",
        flush=True,
    )
    rows = table_rows(position_encoding, dtype, samples, kernels)
    return rows, samples, kernels


def main(_):
    if keras.backend.backend() != "jax":
        raise app.UsageError(
            "The fused path runs on JAX only: set KERAS_BACKEND=jax."
        )
    device = jax.devices()[0]
    print(
        f"devices: {jax.devices()} ({device.device_kind}); jax "
        f"{jax.__version__}, keras {keras.__version__}",
        flush=True,
    )
    inputs = make_inputs(np.random.default_rng(0))
    rows, samples, kernels = [], {}, {}
    for dtype in FLAGS.dtypes:
        for position_encoding in FLAGS.position_encodings:
            model, timings, kernels[f"{position_encoding} {dtype}"] = (
                model_rows(position_encoding, dtype, inputs)
            )
            rows += model
            samples[f"{position_encoding} {dtype}"] = {
                f"{step}, {'fused' if fused else 'explicit'}": t
                for (step, fused), t in timings.items()
            }
            harness.write_json(
                FLAGS.output,
                samples,
                device=device.device_kind,
                kernels=kernels,
                table=markdown_table(HEADER, rows, ALIGN),
            )
    harness.print_table(
        f"dims {describe_dims()}, rounds={FLAGS.rounds}x"
        f"{FLAGS.steps_per_round} steps, {device.device_kind}",
        HEADER,
        rows,
        ALIGN,
    )


if __name__ == "__main__":
    app.run(main)
