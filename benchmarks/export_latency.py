r"""Latency of exported encoders: TUPE-R, DIET-ABS, DIET-REL vs BERT.

Exports each encoder with `tupe_tf.export.export_hub_encoder` (position bias
folded at --seq_length, and unfolded for comparison), loads every SavedModel
into this one process with `tf.saved_model.load`, and times the `serve`
endpoint on random token ids, interleaving the models in every repeat so that
load from other processes affects them alike. Reports medians and the ratio
to exported `bert` of the same dimensions (BERT-small by default).

Example:
  python benchmarks/export_latency.py --repeats=30
"""

import os
import shlex
import statistics
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app
from absl import flags

_NUM_LAYERS = flags.DEFINE_integer("num_layers", 4, "Transformer layers.")
_HIDDEN_DIM = flags.DEFINE_integer("hidden_dim", 512, "Hidden size.")
_NUM_HEADS = flags.DEFINE_integer("num_heads", 8, "Attention heads.")
_INTERMEDIATE_DIM = flags.DEFINE_integer(
    "intermediate_dim", 2048, "Feedforward size."
)
_VOCABULARY_SIZE = flags.DEFINE_integer(
    "vocabulary_size", 30522, "Vocabulary size."
)
_SEQ_LENGTH = flags.DEFINE_integer(
    "seq_length", 128, "Exported (folded) and timed length."
)
_BATCH_SIZES = flags.DEFINE_list(
    "batch_sizes", ["1", "32"], "Batch sizes to time."
)
_REPEATS = flags.DEFINE_integer(
    "repeats", 30, "Timed calls per model and batch size (batch 1 uses 4x)."
)
_WARMUP = flags.DEFINE_integer("warmup", 3, "Untimed calls per model first.")
_ENCODINGS = flags.DEFINE_list(
    "position_encodings",
    ["tupe-r", "diet-abs", "diet-rel", "rope", "alibi"],
    "Encodings compared with `bert`.",
)
flags.register_validator(
    "repeats", lambda v: v >= 3, message="--repeats must be >= 3."
)
flags.register_validator(
    "batch_sizes",
    lambda v: all(s.isdigit() and int(s) > 0 for s in v),
    message="--batch_sizes takes positive integers.",
)


def _export_all(export_root):
    import keras

    import tupe_tf
    from tupe_tf.export import export_hub_encoder

    variants = [("bert", True)]
    for encoding in _ENCODINGS.value:
        variants += [(encoding, True), (encoding, False)]
    paths = {}
    for encoding, fold in variants:
        keras.utils.set_random_seed(0)
        backbone = tupe_tf.TupeBackbone(
            vocabulary_size=_VOCABULARY_SIZE.value,
            num_layers=_NUM_LAYERS.value,
            num_heads=_NUM_HEADS.value,
            hidden_dim=_HIDDEN_DIM.value,
            intermediate_dim=_INTERMEDIATE_DIM.value,
            max_sequence_length=max(512, _SEQ_LENGTH.value),
            position_encoding=encoding,
        )
        name = (
            encoding if fold or encoding == "bert" else f"{encoding} unfolded"
        )
        path = os.path.join(export_root, name.replace(" ", "_"))
        export_hub_encoder(
            backbone,
            path,
            seq_length=_SEQ_LENGTH.value,
            fold_positional_bias=fold,
        )
        paths[name] = path
        print(f"exported {name}", flush=True)
    return paths


def _time_models(models, batch_size, repeats):
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)
    shape = (batch_size, _SEQ_LENGTH.value)
    inputs = {
        "input_word_ids": tf.constant(
            rng.integers(5, _VOCABULARY_SIZE.value, shape), tf.int32
        ),
        "input_mask": tf.ones(shape, tf.int32),
        "input_type_ids": tf.zeros(shape, tf.int32),
    }
    for model in models.values():
        for _ in range(_WARMUP.value):
            model.serve(inputs)["sequence_output"].numpy()
    times = {name: [] for name in models}
    names = list(models)
    for repeat in range(repeats):
        # Rotate the order so no model is always first after a pause.
        order = names[repeat % len(names) :] + names[: repeat % len(names)]
        for name in order:
            start = time.perf_counter()
            models[name].serve(inputs)["sequence_output"].numpy()
            times[name].append(time.perf_counter() - start)
    return times


def _quartile_spread(times):
    """Interquartile range over median: the run-to-run noise of one model."""
    q1, _, q3 = statistics.quantiles(times, n=4)
    return (q3 - q1) / statistics.median(times)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    import tensorflow as tf
    from absl import logging

    logging.set_verbosity(logging.WARNING)  # tf.saved_model.save's INFO lines
    command = "python " + " ".join(shlex.quote(a) for a in sys.argv)
    with tempfile.TemporaryDirectory() as export_root:
        paths = _export_all(export_root)
        models = {
            name: tf.saved_model.load(path) for name, path in paths.items()
        }
        medians, noise = {}, {}
        for batch_size in (int(b) for b in _BATCH_SIZES.value):
            repeats = _REPEATS.value * (4 if batch_size == 1 else 1)
            times = _time_models(models, batch_size, repeats)
            medians[batch_size] = {
                n: statistics.median(t) for n, t in times.items()
            }
            noise[batch_size] = _quartile_spread(times["bert"])
            print(
                f"timed batch {batch_size} ({repeats} interleaved repeats)",
                flush=True,
            )

    print()
    print(
        f"Exported hub_encoder latency, median ms per call, seq "
        f"{_SEQ_LENGTH.value}, {_NUM_LAYERS.value} layers, hidden "
        f"{_HIDDEN_DIM.value}, {_NUM_HEADS.value} heads, intermediate "
        f"{_INTERMEDIATE_DIM.value}; tf {tf.__version__}, "
        f"{os.cpu_count()} CPUs; {time.strftime('%Y-%m-%d %H:%M %Z')}"
    )
    batch_sizes = list(medians)
    header = f"| {'model':<20} |" + "".join(
        f" {f'batch {b} ms':>11} | vs bert |" for b in batch_sizes
    )
    print(header)
    print("|" + "-" * 22 + "|" + "-------------|---------|" * len(batch_sizes))
    for name in paths:
        row = f"| {name:<20} |"
        for b in batch_sizes:
            ratio = medians[b][name] / medians[b]["bert"] - 1
            row += f" {medians[b][name] * 1e3:11.2f} | {ratio:+7.1%} |"
        print(row)
    print(
        "Noise (bert's interquartile range / median): "
        + ", ".join(f"batch {b}: {noise[b]:.1%}" for b in batch_sizes)
    )
    print()
    print(f"Command: {command}")


if __name__ == "__main__":
    app.run(main)
