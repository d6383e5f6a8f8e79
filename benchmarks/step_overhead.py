"""Train-step and predict time of every position encoding vs keras-hub BERT.

All models are built in one process with the same dims and fed the same
batch; rounds are interleaved (every model once per round, in a shuffled
order) and the median per-step time of each model is divided by the
median of `keras_hub.models.BertBackbone` (through `BertMaskedLM` for the
train step, as in pre-training).

    python benchmarks/step_overhead.py                 # BERT-small dims
    python benchmarks/step_overhead.py --num_layers=2 --hidden_dim=128 \
        --num_heads=2 --intermediate_dim=512 --rounds=5   # quick look
"""

import os
import random
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import keras_hub  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from absl import app  # noqa: E402
from absl import flags  # noqa: E402
from model_dims import define_model_dims  # noqa: E402

import tupe_tf  # noqa: E402

FLAGS = flags.FLAGS
define_model_dims(
    num_layers=4,
    hidden_dim=512,
    num_heads=8,
    intermediate_dim=2048,
    seq_length=128,
    batch_size=32,
    size="BERT-small",
)
flags.DEFINE_integer(
    "rounds", 9, "Interleaved rounds, median over them (9: 5 showed +7% noise)."
)
flags.DEFINE_integer("steps_per_round", 3, "Timed steps per model per round.")
flags.DEFINE_bool("jit_compile", False, "Compile train and predict with XLA.")
flags.DEFINE_list(
    "options",
    list(tupe_tf.POSITION_ENCODINGS),
    "Position encodings to measure.",
)

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
    dims = dict(
        vocabulary_size=FLAGS.vocabulary_size,
        num_layers=FLAGS.num_layers,
        num_heads=FLAGS.num_heads,
        hidden_dim=FLAGS.hidden_dim,
        intermediate_dim=FLAGS.intermediate_dim,
        max_sequence_length=max(512, FLAGS.seq_length),
    )
    if name == "keras-hub BERT":
        backbone = keras_hub.models.BertBackbone(**dims)
    else:
        backbone = tupe_tf.TupeBackbone(**dims, position_encoding=name)
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


def time_steps(fn):
    """Per-step (wall, process CPU) seconds over `steps_per_round` calls.

    CPU time (all threads of this process) is reported beside wall time: it
    is far less sensitive to other processes competing for the cores.
    """
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(FLAGS.steps_per_round):
        fn()
    steps = FLAGS.steps_per_round
    return (
        (time.perf_counter() - wall) / steps,
        (time.process_time() - cpu) / steps,
    )


def main(_):
    rng = np.random.default_rng(0)
    x, y, w = make_batch(rng)
    backbone_inputs = {
        k: tf.constant(v) for k, v in x.items() if k != "mask_positions"
    }
    names = ["keras-hub BERT"] + list(FLAGS.options)
    models = {}
    for name in names:
        mlm, predict = build(name)
        mlm.train_on_batch(x, y, sample_weight=w)  # trace and warm up
        predict(backbone_inputs)
        models[name] = (mlm, predict)
    train_times = {name: [] for name in names}
    predict_times = {name: [] for name in names}
    order = list(names)
    for round_index in range(FLAGS.rounds):
        random.Random(round_index).shuffle(order)
        for name in order:
            mlm, predict = models[name]
            train_times[name].append(
                time_steps(lambda: mlm.train_on_batch(x, y, sample_weight=w))
            )
            predict_times[name].append(
                time_steps(
                    lambda: predict(backbone_inputs)["sequence_output"].numpy()
                )
            )
        print(f"round {round_index + 1}/{FLAGS.rounds} done", flush=True)

    def median(samples, kind):
        return statistics.median(sample[kind] for sample in samples)

    print()
    print(
        f"dims: layers={FLAGS.num_layers} hidden={FLAGS.hidden_dim} "
        f"heads={FLAGS.num_heads} ffn={FLAGS.intermediate_dim} "
        f"seq={FLAGS.seq_length} batch={FLAGS.batch_size} "
        f"jit_compile={FLAGS.jit_compile} rounds={FLAGS.rounds}x"
        f"{FLAGS.steps_per_round} steps, tf {tf.__version__}, "
        f"{os.cpu_count()} CPU cores"
    )
    print(
        "| option | train step ms (wall) | train vs BERT (wall / CPU) "
        "| predict ms (wall) | predict vs BERT (wall / CPU) |"
    )
    print("| --- | ---: | ---: | ---: | ---: |")
    base = "keras-hub BERT"
    for name in names:
        cells = []
        for times in (train_times, predict_times):
            wall, cpu = median(times[name], 0), median(times[name], 1)
            base_wall, base_cpu = median(times[base], 0), median(times[base], 1)
            cells.append(f"{wall * 1e3:.1f}")
            cells.append(
                f"{(wall / base_wall - 1) * 100:+.1f}% / "
                f"{(cpu / base_cpu - 1) * 100:+.1f}%"
            )
        print(f"| {name} | " + " | ".join(cells) + " |")
    print("\nTarget: every option at most +3% train and +3% predict.")


if __name__ == "__main__":
    app.run(main)
