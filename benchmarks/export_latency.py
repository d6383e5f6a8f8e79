r"""Latency of exported encoders: TUPE-R, DIET-ABS, DIET-REL vs BERT.

Exports each encoder with `tupe_tf.export.export_hub_encoder` (position bias
folded at --seq_length, and unfolded for comparison), loads every SavedModel
into this one process with `tf.saved_model.load`, and times the `serve`
endpoint on random token ids in the harness's interleaved rounds, so that
load from other processes affects the models alike: in each round every
model, in a shuffled order, gives the median latency of `--repeats` calls
and its ratio to exported `bert` of the same dimensions (BERT-small by
default); the report is the median ratio over rounds with its [min, max].

`--output` writes the harness's JSON record: command, machine, date, load
average, flags, every round's timings and the printed report.

Example:
  python benchmarks/export_latency.py --rounds=9 --repeats=5 \
      --output=benchmarks/results/export_latency_9rounds.json
  # This checkout against an older commit, both timed in this process:
  git worktree add /tmp/baseline <commit>
  python benchmarks/export_latency.py --baseline_tree=/tmp/baseline \
      --position_encodings=tupe-r,diet-rel --repeats=3
"""

import json
import os
import shlex
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import harness  # noqa: E402
from absl import app  # noqa: E402
from absl import flags  # noqa: E402
from model_dims import backbone_dims  # noqa: E402
from model_dims import define_model_dims  # noqa: E402
from model_dims import describe_dims  # noqa: E402

FLAGS = harness.define_round_flags(rounds=9)
define_model_dims("small", seq_length=128)
_BATCH_SIZES, _REPEATS = harness.define_latency_flags(repeats=5)
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
_OUTPUT = flags.DEFINE_string("output", "", "Raw JSON file to write.")


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
    dims = backbone_dims()
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
            json.dumps([dims, FLAGS.seq_length, exports]),
        ],
        cwd=tree,
        env=dict(os.environ, PYTHONPATH=tree),
        check=True,
    )
    for name in paths:
        print(f"exported {name} ({tree})", flush=True)
    return paths


def _inputs(batch_size):
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)
    shape = (batch_size, FLAGS.seq_length)
    return {
        "input_word_ids": tf.constant(
            rng.integers(5, FLAGS.vocabulary_size, shape), tf.int32
        ),
        "input_mask": tf.ones(shape, tf.int32),
        "input_type_ids": tf.zeros(shape, tf.int32),
    }


def _latency_case(model, inputs, repeats):
    """A timed unit: the median latency of `repeats` calls."""

    def call():
        return model.serve(inputs)["sequence_output"].numpy()

    for _ in range(_WARMUP.value):
        call()
    return harness.median_of_calls(call, repeats)


def _time_batch_size(models, batch_size):
    """{name: per-round Timings} of every model at one batch size."""
    inputs = _inputs(batch_size)
    repeats = _REPEATS.value * (4 if batch_size == 1 else 1)
    cases = {
        name: _latency_case(model, inputs, repeats)
        for name, model in models.items()
    }
    samples = harness.run_rounds(cases, FLAGS.rounds)
    print(
        f"timed batch {batch_size} ({FLAGS.rounds} rounds of {repeats} "
        "calls per model)",
        flush=True,
    )
    return samples


def _print_report(names, samples):
    """Prints the table and `bert`'s own latency; returns what it printed."""
    import tensorflow as tf

    def cell(per_model, name):
        ratio = harness.summarize(per_model[name], per_model["bert"])
        return ratio.wall_ratio.map(lambda r: r - 1).format("+.1%")

    report = harness.print_table(
        "Exported hub_encoder latency vs exported bert, median over "
        f"{FLAGS.rounds} rounds [min, max] of each round's ratio of median "
        f"latencies; {describe_dims()}; tf {tf.__version__}, "
        f"{harness.machine()}; {time.strftime('%Y-%m-%d %H:%M %Z')}",
        ["model"] + [f"batch {b}: vs bert [min, max]" for b in samples],
        [
            [name] + [cell(per_model, name) for per_model in samples.values()]
            for name in names
            if name != "bert"
        ],
        align=[None] + ["right"] * len(samples),
    )
    for batch_size, per_model in samples.items():
        bert_ms = harness.summarize(per_model["bert"]).wall.map(
            lambda t: t * 1e3
        )
        line = (
            f"bert batch {batch_size}: median {bert_ms.median:.2f} ms per "
            f"call, round medians {bert_ms.low:.2f}-{bert_ms.high:.2f} ms"
        )
        print(line)
        report += "\n" + line
    return report


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
        samples = {
            b: _time_batch_size(models, b)
            for b in (int(b) for b in _BATCH_SIZES.value)
        }
    report = _print_report(list(paths), samples)
    print(f"\nCommand: {command}")
    harness.write_json(_OUTPUT.value, samples, report=report)


if __name__ == "__main__":
    app.run(main)
