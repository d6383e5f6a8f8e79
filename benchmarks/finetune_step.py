r"""Fine-tuning step: graph mode vs XLA (`jit_compile`), on the study's recipe.

The comparison study fine-tunes a tiny classifier (2 layers, hidden 128,
length 64, batch 32) dozens of times, so its step time sets the study's
budget. This measures `TupeTextClassifier.fit` steps/s with and without
`jit_compile`, both models in one process, fed the same cached batches, in
interleaved rounds (A, B, A, B, ...); medians over rounds and the ratio of
the medians are printed, wall and process CPU time.

  python benchmarks/finetune_step.py               # 9 rounds x 100 steps
  python benchmarks/finetune_step.py --position_encoding=tupe-r

Prints a Markdown table and writes it, with the raw numbers, to --output.
"""

import json
import os
import statistics
import time

from absl import app
from absl import flags

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

FLAGS = flags.FLAGS
flags.DEFINE_string("model_size", "tiny", "Model size.")
flags.DEFINE_string("position_encoding", "bert", "Position encoding.")
flags.DEFINE_integer("seq_length", 64, "Sequence length.")
flags.DEFINE_integer("batch_size", 32, "Batch size.")
flags.DEFINE_integer("vocabulary_size", 8192, "Vocabulary size.")
flags.DEFINE_integer("steps_per_round", 100, "Timed steps per measurement.")
flags.DEFINE_integer("rounds", 9, "Interleaved rounds (median reported).")
flags.DEFINE_string(
    "output", "benchmarks/results/finetune_step.json", "Where results go."
)


def main(argv):
    del argv
    import keras
    import numpy as np
    import tensorflow as tf

    import tupe_tf
    from tupe_tf.training import config as config_lib

    rng = np.random.default_rng(0)
    n = 20 * FLAGS.batch_size
    features = {
        "token_ids": rng.integers(
            5, FLAGS.vocabulary_size, (n, FLAGS.seq_length)
        ).astype("int32"),
        "segment_ids": np.zeros((n, FLAGS.seq_length), "int32"),
        "padding_mask": np.ones((n, FLAGS.seq_length), bool),
    }
    labels = rng.integers(0, 2, (n,))
    dataset = (
        tf.data.Dataset.from_tensor_slices((features, labels))
        .batch(FLAGS.batch_size)
        .cache()
        .repeat()
    )
    dims = config_lib.MODEL_SIZES[FLAGS.model_size]

    def classifier(jit_compile):
        keras.utils.set_random_seed(0)
        backbone = tupe_tf.TupeBackbone(
            vocabulary_size=FLAGS.vocabulary_size,
            max_sequence_length=FLAGS.seq_length,
            position_encoding=FLAGS.position_encoding,
            **dims,
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
        return model

    models = {"graph": classifier(False), "xla": classifier(True)}
    raw = {name: {"wall": [], "cpu": []} for name in models}
    for round_index in range(FLAGS.rounds):
        order = list(models)
        if round_index % 2:
            order.reverse()
        for name in order:
            wall, cpu = time.perf_counter(), time.process_time()
            models[name].fit(
                dataset, steps_per_epoch=FLAGS.steps_per_round, verbose=0
            )
            steps = FLAGS.steps_per_round
            raw[name]["wall"].append(steps / (time.perf_counter() - wall))
            raw[name]["cpu"].append(steps / (time.process_time() - cpu))
        print(f"round {round_index + 1}/{FLAGS.rounds} done", flush=True)

    def median(name, kind):
        return statistics.median(raw[name][kind])

    lines = [
        f"Fine-tuning steps/s, {FLAGS.model_size} "
        f"{FLAGS.position_encoding}, length {FLAGS.seq_length}, batch "
        f"{FLAGS.batch_size}, median of {FLAGS.rounds} interleaved rounds "
        f"of {FLAGS.steps_per_round} steps:",
        "",
        "| step | wall steps/s | min-max | CPU steps/s | ms/step (wall) |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name in models:
        lines.append(
            f"| {name} | {median(name, 'wall'):.2f} | "
            f"{min(raw[name]['wall']):.2f}-{max(raw[name]['wall']):.2f} | "
            f"{median(name, 'cpu'):.2f} | "
            f"{1000 / median(name, 'wall'):.0f} |"
        )
    lines.append("")
    lines.append(
        "XLA / graph: wall "
        f"{median('xla', 'wall') / median('graph', 'wall'):.2f}x, CPU "
        f"{median('xla', 'cpu') / median('graph', 'cpu'):.2f}x"
    )
    table = "\n".join(lines)
    print(table)
    os.makedirs(os.path.dirname(os.path.abspath(FLAGS.output)), exist_ok=True)
    with open(FLAGS.output, "w") as f:
        json.dump({"flags": FLAGS.flag_values_dict(), "raw": raw}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    app.run(main)
