r"""Latency of exported encoders: TUPE-R, DIET-ABS, DIET-REL vs BERT.

Exports each encoder with `tupe_tf.export.export_hub_encoder` (position bias
folded at --seq_length, and unfolded for comparison), loads every SavedModel
into this one process with `tf.saved_model.load`, and times the `serve`
endpoint on random token ids, interleaving the models in every repeat so that
load from other processes affects them alike. The timing is split into
`--rounds` rounds; each round gives every model's median and its ratio to
exported `bert` of the same dimensions (BERT-small by default), and the
report is the median ratio over rounds with its [min, max].

Example:
  python benchmarks/export_latency.py --rounds=9 --repeats=5
  # This checkout against an older commit, both timed in this process:
  git worktree add /tmp/baseline <commit>
  python benchmarks/export_latency.py --baseline_tree=/tmp/baseline \
      --position_encodings=tupe-r,diet-rel --repeats=3
"""

import json
import os
import shlex
import statistics
import subprocess
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
_ROUNDS = flags.DEFINE_integer(
    "rounds", 9, "Rounds; each gives one latency ratio per model."
)
_REPEATS = flags.DEFINE_integer(
    "repeats",
    5,
    "Timed calls per model, batch size and round (batch 1 uses 4x).",
)
_WARMUP = flags.DEFINE_integer("warmup", 3, "Untimed calls per model first.")
_ENCODINGS = flags.DEFINE_list(
    "position_encodings",
    ["tupe-r", "diet-abs", "diet-rel", "rope", "alibi"],
    "Encodings compared with `bert`.",
)
_BASELINE_TREE = flags.DEFINE_string(
    "baseline_tree",
    None,
    "A checkout of another commit (e.g. `git worktree add /tmp/old <commit>`):"
    " its exports are timed beside this checkout's, as rows 'baseline/...'.",
)
flags.register_validator(
    "repeats", lambda v: v >= 3, message="--repeats must be >= 3."
)
flags.register_validator(
    "rounds", lambda v: v >= 1, message="--rounds must be >= 1."
)
flags.register_validator(
    "batch_sizes",
    lambda v: all(s.isdigit() and int(s) > 0 for s in v),
    message="--batch_sizes takes positive integers.",
)


_EXPORT_SCRIPT = r"""
import json, sys
import keras
import tupe_tf
from tupe_tf.export import export_hub_encoder
dims, seq_length, exports = json.loads(sys.argv[1])
for encoding, fold, path in exports:
    keras.utils.set_random_seed(0)
    backbone = tupe_tf.TupeBackbone(position_encoding=encoding, **dims)
    export_hub_encoder(
        backbone, path, seq_length=seq_length, fold_positional_bias=fold
    )
"""


def _export_all(export_root, tree=None, prefix=""):
    """Exports bert and each encoding (folded, unfolded) with one tree's code.

    The export runs in a child process whose `tupe_tf` comes from `tree`
    (default: this checkout), so that exports of two commits can be timed
    side by side in this process; the SavedModels need no `tupe_tf` to load.
    """
    tree = tree or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    variants = [("bert", True, prefix + "bert")]
    for encoding in _ENCODINGS.value:
        variants += [
            (encoding, True, prefix + encoding),
            (encoding, False, f"{prefix}{encoding} unfolded"),
        ]
    dims = dict(
        vocabulary_size=_VOCABULARY_SIZE.value,
        num_layers=_NUM_LAYERS.value,
        num_heads=_NUM_HEADS.value,
        hidden_dim=_HIDDEN_DIM.value,
        intermediate_dim=_INTERMEDIATE_DIM.value,
        max_sequence_length=max(512, _SEQ_LENGTH.value),
    )
    paths = {
        name: os.path.join(
            export_root, name.replace(" ", "_").replace("/", "_")
        )
        for _, _, name in variants
    }
    exports = [
        (encoding, fold, paths[name]) for encoding, fold, name in variants
    ]
    subprocess.run(
        [
            sys.executable,
            "-c",
            _EXPORT_SCRIPT,
            json.dumps([dims, _SEQ_LENGTH.value, exports]),
        ],
        cwd=tree,
        env=dict(os.environ, PYTHONPATH=tree),
        check=True,
    )
    for name in paths:
        print(f"exported {name} ({tree})", flush=True)
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


def _round_ratios(models, batch_size, repeats, rounds):
    """Per round, each model's median latency over bert's, minus one."""
    ratios = {name: [] for name in models}
    bert_medians = []
    for _ in range(rounds):
        times = _time_models(models, batch_size, repeats)
        medians = {n: statistics.median(t) for n, t in times.items()}
        bert_medians.append(medians["bert"])
        for name, median in medians.items():
            ratios[name].append(median / medians["bert"] - 1)
    return ratios, bert_medians


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    import tensorflow as tf
    from absl import logging

    logging.set_verbosity(logging.WARNING)  # tf.saved_model.save's INFO lines
    command = "python " + " ".join(shlex.quote(a) for a in sys.argv)
    with tempfile.TemporaryDirectory() as export_root:
        paths = _export_all(export_root)
        if _BASELINE_TREE.value:
            paths.update(
                _export_all(export_root, _BASELINE_TREE.value, "baseline/")
            )
        models = {
            name: tf.saved_model.load(path) for name, path in paths.items()
        }
        summaries = {}
        for batch_size in (int(b) for b in _BATCH_SIZES.value):
            repeats = _REPEATS.value * (4 if batch_size == 1 else 1)
            summaries[batch_size] = _round_ratios(
                models, batch_size, repeats, _ROUNDS.value
            )
            print(
                f"timed batch {batch_size} ({_ROUNDS.value} rounds of "
                f"{repeats} interleaved repeats)",
                flush=True,
            )

    print()
    print(
        f"Exported hub_encoder latency vs exported bert, median over "
        f"{_ROUNDS.value} rounds [min, max] of each round's ratio of median "
        f"latencies; seq {_SEQ_LENGTH.value}, {_NUM_LAYERS.value} layers, "
        f"hidden {_HIDDEN_DIM.value}, {_NUM_HEADS.value} heads, intermediate "
        f"{_INTERMEDIATE_DIM.value}; tf {tf.__version__}, "
        f"{os.cpu_count()} CPUs; {time.strftime('%Y-%m-%d %H:%M %Z')}; "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    batch_sizes = list(summaries)
    print(
        f"| {'model':<20} |"
        + "".join(f" batch {b}: vs bert [min, max] |" for b in batch_sizes)
    )
    print("|" + "-" * 22 + "|" + "---:|" * len(batch_sizes))
    for name in paths:
        if name == "bert":
            continue
        row = f"| {name:<20} |"
        for b in batch_sizes:
            ratios = sorted(summaries[b][0][name])
            row += (
                f" {statistics.median(ratios):+.1%} "
                f"[{ratios[0]:+.1%}, {ratios[-1]:+.1%}] |"
            )
        print(row)
    for b in batch_sizes:
        bert_ms = sorted(1e3 * m for m in summaries[b][1])
        print(
            f"bert batch {b}: median {statistics.median(bert_ms):.2f} ms per "
            f"call, round medians {bert_ms[0]:.2f}-{bert_ms[-1]:.2f} ms"
        )
    print()
    print(f"Command: {command}")


if __name__ == "__main__":
    app.run(main)
