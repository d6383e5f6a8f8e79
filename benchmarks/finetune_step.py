r"""Fine-tuning step: graph mode vs XLA (`jit_compile`), on the study's recipe.

The comparison study fine-tunes a tiny classifier (2 layers, hidden 128,
length 64, batch 32) dozens of times, so its step time sets the study's
budget. This measures `TupeTextClassifier.fit` steps/s with and without
`jit_compile`, both models in one process, fed the same cached batches, in
the harness's interleaved rounds; medians over rounds and the median of the
per-round ratio are printed, wall and process CPU time.

  python benchmarks/finetune_step.py               # 9 rounds x 100 steps
  python benchmarks/finetune_step.py --position_encoding=tupe-r

Prints a Markdown table and writes it, with the raw numbers, to --output.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import harness  # noqa: E402
from absl import app  # noqa: E402
from absl import flags  # noqa: E402
from model_dims import backbone_dims  # noqa: E402
from model_dims import define_model_dims  # noqa: E402

FLAGS = harness.define_round_flags(rounds=9, steps_per_round=100)
define_model_dims("tiny", seq_length=64, batch_size=32, vocabulary_size=8192)
flags.DEFINE_string("position_encoding", "bert", "Position encoding.")
flags.DEFINE_string(
    "output", "benchmarks/results/finetune_step.json", "Where results go."
)


def make_dataset():
    """20 cached random batches, repeated."""
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)
    n, length = 20 * FLAGS.batch_size, FLAGS.seq_length
    features = {
        "token_ids": rng.integers(5, FLAGS.vocabulary_size, (n, length)).astype(
            "int32"
        ),
        "segment_ids": np.zeros((n, length), "int32"),
        "padding_mask": np.ones((n, length), bool),
    }
    labels = rng.integers(0, 2, (n,))
    return (
        tf.data.Dataset.from_tensor_slices((features, labels))
        .batch(FLAGS.batch_size)
        .cache()
        .repeat()
    )


def classifier_case(dataset, jit_compile):
    """A compiled, warmed-up classifier; one unit fits `steps_per_round`."""
    import keras

    import tupe_tf

    keras.utils.set_random_seed(0)
    backbone = tupe_tf.TupeBackbone(
        **backbone_dims(max_sequence_length=FLAGS.seq_length),
        position_encoding=FLAGS.position_encoding,
    )
    model = tupe_tf.TupeTextClassifier(
        backbone, num_classes=2, preprocessor=None
    )
    model.compile(
        optimizer=keras.optimizers.AdamW(1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=jit_compile,
    )
    model.fit(dataset, steps_per_epoch=5, verbose=0)  # compile
    steps = FLAGS.steps_per_round

    def fit():
        return model.fit(dataset, steps_per_epoch=steps, verbose=0)

    return lambda: harness.time_steps(fit, 1).per(steps)


def report(samples):
    def row(name):
        summary = harness.summarize(samples[name])
        rate = summary.wall.map(lambda t: 1 / t)
        cpu_rate = summary.cpu.map(lambda t: 1 / t)
        return [
            name,
            f"{rate.median:.2f}",
            f"{rate.low:.2f}-{rate.high:.2f}",
            f"{cpu_rate.median:.2f}",
            f"{1e3 / rate.median:.0f}",
        ]

    harness.print_table(
        f"Fine-tuning steps/s, {FLAGS.position_encoding}, length "
        f"{FLAGS.seq_length}, batch {FLAGS.batch_size}, median of "
        f"{FLAGS.rounds} interleaved rounds of {FLAGS.steps_per_round} "
        f"steps, {harness.machine()}:",
        ["step", "wall steps/s", "min-max", "CPU steps/s", "ms/step (wall)"],
        [row(name) for name in samples],
    )
    # Time of graph / time of XLA: XLA's throughput over the graph's.
    speedup = harness.summarize(samples["graph"], reference=samples["xla"])
    print(
        f"\nXLA / graph: wall {speedup.wall_ratio.median:.2f}x, CPU "
        f"{speedup.cpu_ratio.median:.2f}x"
    )


def main(argv):
    del argv
    dataset = make_dataset()
    cases = {
        "graph": classifier_case(dataset, jit_compile=False),
        "xla": classifier_case(dataset, jit_compile=True),
    }
    samples = harness.run_rounds(cases, FLAGS.rounds)
    report(samples)
    harness.write_json(FLAGS.output, samples)


if __name__ == "__main__":
    app.run(main)
