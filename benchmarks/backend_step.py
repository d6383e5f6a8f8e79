"""The tiny model's pre-training train step on TensorFlow, JAX and PyTorch.

Keras backends cannot share a process, so the parent writes the batches to
an .npz and starts one long-lived worker per backend; each builds the same
`TupeMaskedLM`s (the same NumPy weights, the study's AdamW), compiles and
warms them up. Each round then asks the workers, in a shuffled order, to
run `steps_per_round` steps of every option and report wall and CPU time
(one line each way over stdin/stdout). Medians and the min-max of the
per-round ratios to TensorFlow are printed.

    python benchmarks/backend_step.py --rounds=9 --position_encodings=bert,tupe-r
    python benchmarks/backend_step.py --backends=tensorflow,jax --rounds=3
"""

import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import harness  # noqa: E402
import numpy as np  # noqa: E402
from absl import app  # noqa: E402
from absl import flags  # noqa: E402
from model_dims import backbone_dims  # noqa: E402
from model_dims import define_model_dims  # noqa: E402
from model_dims import describe_dims  # noqa: E402

FLAGS = harness.define_round_flags(rounds=9, steps_per_round=5)
# The study's model, length, batch and WordPiece vocabulary.
define_model_dims("tiny", seq_length=64, batch_size=32, vocabulary_size=8192)
flags.DEFINE_list(
    "backends",
    ["tensorflow", "jax", "torch"],
    "Keras backends to time; the first is the ratios' reference.",
)
flags.DEFINE_list(
    "position_encodings", ["bert", "tupe-r"], "Position encodings to time."
)
flags.DEFINE_bool(
    "jit_compile",
    True,
    "XLA-compile TensorFlow's train step (the study's default). JAX always "
    "compiles its step with XLA; PyTorch runs eagerly.",
)
flags.DEFINE_string("output", None, "Also write the results as JSON here.")
flags.DEFINE_string("worker_batches", None, "Internal: run as a worker.")


def make_batches(rng):
    """`steps_per_round` masked-LM batches, as the reader gives them."""
    n, b = FLAGS.seq_length, FLAGS.batch_size
    p = max(1, round(0.15 * n))
    batches = {}
    for i in range(FLAGS.steps_per_round):
        batches[f"{i}/token_ids"] = rng.integers(
            5, FLAGS.vocabulary_size, (b, n)
        ).astype("int32")
        batches[f"{i}/segment_ids"] = (
            (np.arange(n)[None, :] >= n // 2).repeat(b, 0).astype("int32")
        )
        batches[f"{i}/padding_mask"] = np.ones((b, n), "int32")
        batches[f"{i}/mask_positions"] = np.sort(
            np.stack([rng.choice(np.arange(1, n), p, replace=False)] * b), -1
        ).astype("int32")
        batches[f"{i}/mask_ids"] = rng.integers(
            5, FLAGS.vocabulary_size, (b, p)
        ).astype("int32")
        batches[f"{i}/mask_weights"] = np.ones((b, p), "float32")
    return batches


def build(option, example):
    """A compiled masked LM with NumPy weights, identical on every backend."""
    import keras

    import tupe_tf
    from tupe_tf.training.optimization import create_optimizer
    from tupe_tf.utils.backend import assign_seeded_weights

    backbone = tupe_tf.TupeBackbone(
        **backbone_dims(max_sequence_length=FLAGS.seq_length),
        position_encoding=option,
    )
    model = tupe_tf.TupeMaskedLM(backbone, preprocessor=None)
    model(example)
    assign_seeded_weights(model, seed=0, stddev=0.02)
    model.compile(
        optimizer=create_optimizer(
            model, num_train_steps=100_000, learning_rate=1e-3, warmup_steps=10
        ),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        weighted_metrics=["sparse_categorical_accuracy"],
        jit_compile=FLAGS.jit_compile
        if keras.backend.backend() != "torch"
        # torch.compile is not Keras's default for PyTorch.
        else False,
    )
    return model


def worker(path):
    """Serves `run OPTION` requests on stdin until `quit`."""
    import keras

    data = np.load(path)
    batches = [
        (
            {
                k: data[f"{i}/{k}"]
                for k in (
                    "token_ids",
                    "segment_ids",
                    "padding_mask",
                    "mask_positions",
                )
            },
            data[f"{i}/mask_ids"],
            data[f"{i}/mask_weights"],
        )
        for i in range(FLAGS.steps_per_round)
    ]
    models = {}
    for option in FLAGS.position_encodings:
        models[option] = build(option, batches[0][0])
        for x, y, w in batches[:2]:  # trace, compile and warm up
            models[option].train_on_batch(x, y, sample_weight=w)
    print(f"ready {keras.backend.backend()}", flush=True)
    for line in sys.stdin:
        words = line.split()
        if words[0] == "quit":
            return
        model = models[words[1]]
        wall, cpu = time.perf_counter(), time.process_time()
        for x, y, w in batches:
            loss = model.train_on_batch(x, y, sample_weight=w)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        steps = len(batches)
        print(f"{wall / steps} {cpu / steps} {loss[0]}", flush=True)


def start_worker(backend, path):
    argv = [a for a in sys.argv[1:] if not a.startswith("--output")]
    env = dict(os.environ, KERAS_BACKEND=backend, PYTHONUNBUFFERED="1")
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = repo + os.pathsep + env.get("PYTHONPATH", "")
    process = subprocess.Popen(
        [sys.executable, __file__, *argv, f"--worker_batches={path}"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    line = process.stdout.readline()
    if line.split() != ["ready", backend]:
        raise RuntimeError(f"{backend} worker failed to start: {line!r}")
    return process


def ask(process, option):
    """Runs one round's steps of `option` in a worker: their `Timing`."""
    process.stdin.write(f"run {option}\n")
    process.stdin.flush()
    wall, cpu, loss = map(float, process.stdout.readline().split())
    if not np.isfinite(loss):
        raise RuntimeError(f"{option}: loss {loss}")
    return harness.Timing(wall, cpu)


def measure(workers):
    """`{"option/backend": per-round Timings}` from the harness's rounds."""
    cases = {
        f"{option}/{backend}": lambda w=worker, o=option: ask(w, o)
        for option in FLAGS.position_encodings
        for backend, worker in workers.items()
    }
    return harness.run_rounds(cases, FLAGS.rounds)


def table_row(samples, option, backend):
    """Median step ms and per-round ratio to the first backend."""
    summary = harness.summarize(
        samples[f"{option}/{backend}"],
        reference=samples[f"{option}/{FLAGS.backends[0]}"],
    )
    cells = [option, backend]
    for time_spread, ratio in (
        (summary.wall, summary.wall_ratio),
        (summary.cpu, summary.cpu_ratio),
    ):
        cells.append(f"{time_spread.median * 1e3:.1f}")
        cells.append(f"{ratio.median:.2f}x [{ratio.low:.2f}, {ratio.high:.2f}]")
    return cells


def print_table(samples):
    import tensorflow as tf

    base = FLAGS.backends[0]
    harness.print_table(
        f"dims {describe_dims()} vocab={FLAGS.vocabulary_size}, TF "
        f"jit_compile={FLAGS.jit_compile}, rounds={FLAGS.rounds}x"
        f"{FLAGS.steps_per_round} steps, tf {tf.__version__}, "
        f"{harness.machine()}",
        [
            "option",
            "backend",
            "step ms (wall)",
            f"vs {base} wall [min, max]",
            "step ms (CPU)",
            f"vs {base} CPU [min, max]",
        ],
        [
            table_row(samples, option, backend)
            for option in FLAGS.position_encodings
            for backend in FLAGS.backends
        ],
        align=[None, None] + ["right"] * 4,
    )


def main(_):
    if FLAGS.worker_batches:
        worker(FLAGS.worker_batches)
        return
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "batches.npz")
        np.savez(path, **make_batches(np.random.default_rng(0)))
        workers = {b: start_worker(b, path) for b in FLAGS.backends}
        try:
            samples = measure(workers)
        finally:
            for process in workers.values():
                process.stdin.write("quit\n")
                process.stdin.close()
                process.wait()
    print_table(samples)
    harness.write_json(FLAGS.output, samples)


if __name__ == "__main__":
    app.run(main)
