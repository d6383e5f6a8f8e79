r"""Latency of ONNX Runtime and LiteRT exports against the SavedModel.

For each encoding, exports one randomly initialised encoder three ways with
`tupe_tf.export.export_preset` at --seq_length (position bias folded): the
TF Hub encoder SavedModel, `--format=onnx` and `--format=litert`. All are
loaded into this one process and timed on the same padded token ids in the
harness's shuffled rounds: in each round every (encoding, runtime) gives the
median latency of `--repeats` calls, and its ratio to the SavedModel of the
same encoding in that round. The report is the median ratio over rounds
with its [min, max], and each file's size. ONNX Runtime and LiteRT use as
many threads as the machine has cores, as TensorFlow does.

Example:
  python benchmarks/runtime_latency.py --rounds=9 \
      --output=benchmarks/results/runtime_latency_small_9rounds.json
  python benchmarks/runtime_latency.py \
      --table_from=benchmarks/results/runtime_latency_small_9rounds.json
  python benchmarks/runtime_latency.py --rounds=9 --num_layers=12 \
      --hidden_dim=768 --num_heads=12 --intermediate_dim=3072 --repeats=1 \
      --runtimes=saved_model,litert \
      --output=benchmarks/results/runtime_latency_base_9rounds.json

At BERT-base the ONNX conversion (tf2onnx, through Keras' export) does
not fit the 2-core test machine's memory: its peak grows by several GB
per layer at hidden size 768 (docs/export.md), so that run leaves ONNX
out.
"""

import dataclasses
import json
import os
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import harness  # noqa: E402
from absl import app  # noqa: E402
from absl import flags  # noqa: E402
from model_dims import backbone_dims  # noqa: E402
from model_dims import define_model_dims  # noqa: E402
from model_dims import describe_dims  # noqa: E402

FLAGS = harness.define_round_flags(rounds=9)
define_model_dims("small", seq_length=128)
_BATCH_SIZES, _REPEATS = harness.define_latency_flags(repeats=3)
_ENCODINGS = flags.DEFINE_list(
    "position_encodings",
    ["bert", "tupe-r", "alibi", "rope"],
    "Encodings to export and time.",
)
_RUNTIMES = flags.DEFINE_list(
    "runtimes",
    ["saved_model", "onnx", "litert"],
    "Runtimes to export and time (saved_model is every ratio's reference).",
)
_OUTPUT = flags.DEFINE_string("output", "", "Raw JSON file to write.")
_TABLE_FROM = flags.DEFINE_string(
    "table_from",
    "",
    "Print the table of a raw file that --output wrote; measure nothing.",
)

RUNTIMES = ("saved_model", "onnx", "litert")
_FORMAT = {"saved_model": "hub_encoder", "onnx": "onnx", "litert": "litert"}


def _export(encoding, root):
    """`{runtime: export_dir}` of one randomly initialised encoder."""
    import keras

    import tupe_tf
    import tupe_tf.export

    keras.utils.set_random_seed(0)
    backbone = tupe_tf.TupeBackbone(
        position_encoding=encoding, **backbone_dims()
    )
    preset_dir = os.path.join(root, encoding, "preset")
    backbone.save_to_preset(preset_dir)
    paths = {}
    for runtime in _RUNTIMES.value:
        paths[runtime] = tupe_tf.export.export_preset(
            preset_dir,
            os.path.join(root, encoding, runtime),
            _FORMAT[runtime],
            seq_length=FLAGS.seq_length,
        )
    return paths


def _size_mb(path):
    return (
        sum(
            os.path.getsize(os.path.join(directory, name))
            for directory, _, names in os.walk(path)
            for name in names
        )
        / 2**20
    )


def _callable(runtime, path):
    """`inputs -> first output as NumPy`, in the runtime's own process."""
    import tensorflow as tf

    import tupe_tf.export

    if runtime == "saved_model":
        loaded = tf.saved_model.load(path)  # Kept: it owns the variables.

        def call(inputs):
            return loaded.serve(
                {
                    "input_word_ids": inputs["token_ids"],
                    "input_mask": inputs["padding_mask"],
                    "input_type_ids": inputs["segment_ids"],
                }
            )["sequence_output"].numpy()

        return call
    model = tupe_tf.export.load_runtime_model(path)
    return lambda inputs: model(inputs)["sequence_output"]


def _inputs(batch_size):
    import numpy as np

    rng = np.random.default_rng(0)
    shape = (batch_size, FLAGS.seq_length)
    padding_mask = np.ones(shape, "int32")
    padding_mask[:, FLAGS.seq_length * 3 // 4 :] = 0
    return {
        "token_ids": rng.integers(5, FLAGS.vocabulary_size, shape, "int32"),
        "segment_ids": np.zeros(shape, "int32"),
        "padding_mask": padding_mask,
    }


def _latency_case(call, inputs, repeats):
    call(inputs)  # Warm-up: the first call allocates.
    return harness.median_of_calls(lambda: call(inputs), repeats)


def table(raw):
    """The Markdown table of a raw file's dict (`--output`'s JSON).

    Samples are `{batch: {"<encoding> <runtime>": [[wall, cpu], ...]}}`
    (one pair per round); the table is what `--table_from` prints again
    and docs/benchmarks.md holds verbatim (tests/utils/test_benchmark_tables.py).
    """
    encodings = raw["flags"]["position_encodings"]
    runtimes = raw["flags"].get("runtimes", RUNTIMES)
    rows = []
    for encoding in encodings:
        for runtime in runtimes:
            name = f"{encoding} {runtime}"
            row = [name, f"{raw['file_mb'][name]:.1f}"]
            for per_model in raw["samples"].values():
                timings = [harness.Timing(*t) for t in per_model[name]]
                reference = [
                    harness.Timing(*t)
                    for t in per_model[f"{encoding} saved_model"]
                ]
                summary = harness.summarize(timings, reference)
                milliseconds = summary.wall.map(lambda t: t * 1e3)
                row.append(
                    f"{milliseconds.format('.1f', median_only=True)} ms, "
                    + summary.wall_ratio.format(".2f")
                )
            rows.append(row)
    return harness.markdown_table(
        ["encoding, runtime", "file MB"]
        + [f"batch {b}: ms, ratio [min, max]" for b in raw["samples"]],
        rows,
        align=[None] + ["right"] * (len(raw["samples"]) + 1),
    )


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    if "saved_model" not in _RUNTIMES.value or not set(_RUNTIMES.value) <= set(
        RUNTIMES
    ):
        raise app.UsageError(f"--runtimes: saved_model and some of {RUNTIMES}")
    if _TABLE_FROM.value:
        with open(_TABLE_FROM.value) as raw_file:
            print(table(json.load(raw_file)))
        return
    from absl import logging

    logging.set_verbosity(logging.WARNING)  # tf.saved_model.save's INFO lines
    with tempfile.TemporaryDirectory() as root:
        calls, sizes = {}, {}
        for encoding in _ENCODINGS.value:
            for runtime, path in _export(encoding, root).items():
                calls[f"{encoding} {runtime}"] = _callable(runtime, path)
                sizes[f"{encoding} {runtime}"] = _size_mb(path)
            print(f"exported {encoding}", flush=True)
        samples = {}
        for batch_size in (int(b) for b in _BATCH_SIZES.value):
            inputs = _inputs(batch_size)
            repeats = _REPEATS.value * (4 if batch_size == 1 else 1)
            cases = {
                name: _latency_case(call, inputs, repeats)
                for name, call in calls.items()
            }
            samples[batch_size] = harness.run_rounds(cases, FLAGS.rounds)
    harness.write_json(_OUTPUT.value, samples, file_mb=sizes)
    raw = json.loads(
        json.dumps(
            {
                "samples": samples,
                "file_mb": sizes,
                "flags": harness.benchmark_flags(),
            },
            default=dataclasses.astuple,
        )
    )
    print(
        f"\nLatency per call, median over {FLAGS.rounds} rounds; ratio to "
        f"the SavedModel of the same encoding; {describe_dims()}\n"
    )
    print(table(raw))


if __name__ == "__main__":
    app.run(main)
