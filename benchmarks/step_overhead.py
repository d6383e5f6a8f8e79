"""Train-step and predict time of every position encoding vs keras-hub BERT.

All models are built in one process with the same dims and fed the same
batch; each model's train step and predict are cases of the harness's
interleaved rounds, and each is reported as its per-step median and the
median of its per-round ratio to `keras_hub.models.BertBackbone` (through
`BertMaskedLM` for the train step, as in pre-training).

    python benchmarks/step_overhead.py \
        --output=benchmarks/results/step_overhead_small_128_9rounds.json
    python benchmarks/step_overhead.py --num_layers=2 --hidden_dim=128 \
        --num_heads=2 --intermediate_dim=512 --rounds=1   # quick look

`--output` also gets the command, the flags, every round's wall and CPU
seconds per step of each case (keyed `option/train`, `option/predict`) and
the printed table. `--table_from` prints the table of such a file again,
measuring nothing:

    python benchmarks/step_overhead.py \
        --table_from=benchmarks/results/step_overhead_small_128_9rounds.json
"""

import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import figures  # noqa: E402
import harness  # noqa: E402
import keras  # noqa: E402
import keras_hub  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from absl import app  # noqa: E402
from absl import flags  # noqa: E402
from model_dims import backbone_dims  # noqa: E402
from model_dims import define_model_dims  # noqa: E402
from model_dims import describe_dims  # noqa: E402

import tupe_tf  # noqa: E402

FLAGS = harness.define_round_flags(rounds=9, steps_per_round=3)
define_model_dims("small", seq_length=128, batch_size=32)
flags.DEFINE_bool("jit_compile", False, "Compile train and predict with XLA.")
flags.DEFINE_list(
    "options",
    list(tupe_tf.POSITION_ENCODINGS),
    "Position encodings to measure.",
)
flags.DEFINE_string("output", None, "Also write the results as JSON here.")
flags.DEFINE_string(
    "table_from",
    None,
    "Print the table of a JSON file that --output wrote; measure nothing.",
)

BASE = "keras-hub BERT"
MAX_PREDICTIONS = 20


def make_batch(rng):
    n, b = FLAGS.seq_length, FLAGS.batch_size
    x = {
        "token_ids": rng.integers(5, FLAGS.vocabulary_size, (b, n)).astype(
            "int32"
        ),
        "segment_ids": (np.arange(n)[None, :] >= n // 2)
        .repeat(b, 0)
        .astype("int32"),
        "padding_mask": np.ones((b, n), "int32"),
        "mask_positions": np.sort(
            rng.choice(np.arange(1, n), (b, MAX_PREDICTIONS)), -1
        ).astype("int32"),
    }
    y = rng.integers(5, FLAGS.vocabulary_size, (b, MAX_PREDICTIONS)).astype(
        "int32"
    )
    return x, y, np.ones((b, MAX_PREDICTIONS), "float32")


def build(name):
    if name == BASE:
        backbone = keras_hub.models.BertBackbone(**backbone_dims())
    else:
        backbone = tupe_tf.TupeBackbone(
            **backbone_dims(), position_encoding=name
        )
    mlm = keras_hub.models.BertMaskedLM(backbone, preprocessor=None)
    mlm.compile(
        optimizer=keras.optimizers.AdamW(1e-4),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=FLAGS.jit_compile,
    )
    predict = tf.function(
        lambda inputs: backbone(inputs, training=False),
        jit_compile=FLAGS.jit_compile,
    )
    return mlm, predict


def model_cases(name, batch):
    """The train and predict cases of one model, traced and warmed up."""
    x, y, w = batch
    inputs = {k: tf.constant(v) for k, v in x.items() if k != "mask_positions"}
    mlm, predict = build(name)

    def train():
        return mlm.train_on_batch(x, y, sample_weight=w)

    def infer():
        return predict(inputs)["sequence_output"].numpy()

    train(), infer()
    steps = FLAGS.steps_per_round
    return {
        (name, "train"): lambda: harness.time_steps(train, steps),
        (name, "predict"): lambda: harness.time_steps(infer, steps),
    }


def print_results(title, names, samples):
    """Prints and returns the table of `samples` ({(name, step): Timings})
    under `title`: figures.py's, which docs/benchmarks.md shows."""
    text = f"{title}\n\n{figures.step_overhead_table(names, samples)}"
    print(f"\n{text}", flush=True)
    return text


def read_results(path):
    """(title, names, samples) of a JSON file that `--output` wrote."""
    with open(path) as f:
        raw = json.load(f)
    names, samples = figures.step_overhead_samples(raw)
    return raw["table"].split("\n", 1)[0], names, samples


def main(_):
    if FLAGS.table_from:
        print_results(*read_results(FLAGS.table_from))
        return
    batch = make_batch(np.random.default_rng(0))
    names = [BASE] + list(FLAGS.options)
    cases = {}
    for name in names:
        cases.update(model_cases(name, batch))
    samples = harness.run_rounds(cases, FLAGS.rounds)
    title = (
        f"dims {describe_dims()}, jit_compile={FLAGS.jit_compile}, "
        f"rounds={FLAGS.rounds}x{FLAGS.steps_per_round} steps, tf "
        f"{tf.__version__}, {harness.machine()}"
    )
    table = print_results(title, names, samples)
    print("\nTarget: every option at most +3% train and +3% predict.")
    harness.write_json(
        FLAGS.output,
        {f"{name}/{step}": times for (name, step), times in samples.items()},
        table=table,
    )


if __name__ == "__main__":
    app.run(main)
