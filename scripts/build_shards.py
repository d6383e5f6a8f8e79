r"""Builds packed MLM pre-training TFRecord shards with TF-Text.

Example:
  python scripts/build_shards.py --input='corpus/*.txt' --vocab_file=vocab.txt \
      --output_dir=shards --max_seq_length=128 --num_shards=16 --seed=1 \
      --lowercase

Static (Model Garden schema) shards:
  ... --static_masking --dupe_factor=5 --max_predictions_per_seq=20

Without --input, the embedded gensim Wikipedia sample is used.
"""

import json
import os
import sys
import time

from absl import app
from absl import flags

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from data_pipeline import process_startup  # pylint: disable=g-import-not-at-top,wrong-import-position
from data_pipeline import shards as shards_lib  # pylint: disable=g-import-not-at-top,wrong-import-position

# Before anything imports TensorFlow (see data_pipeline/process_startup.py).
process_startup.skip_unused_optional_imports()

_INPUT = flags.DEFINE_string(
    "input",
    None,
    "Comma-separated text files or globs (.txt, .gz, .bz2), "
    "one sentence or paragraph per line, blank line between documents. "
    "Default: the embedded gensim Wikipedia sample.",
)
_VOCAB_FILE = flags.DEFINE_string("vocab_file", None, "WordPiece vocabulary.")
_OUTPUT_DIR = flags.DEFINE_string(
    "output_dir", None, "Directory for shards and manifest.json."
)
_MAX_SEQ_LENGTH = flags.DEFINE_integer(
    "max_seq_length", 128, "Longest sequence, [CLS] and [SEP] included."
)
_NUM_SHARDS = flags.DEFINE_integer("num_shards", 8, "Number of TFRecord files.")
_SEED = flags.DEFINE_integer("seed", 12345, "Seed of static masking.")
_STATIC_MASKING = flags.DEFINE_boolean(
    "static_masking",
    False,
    "Write pre-masked examples in TF Model Garden's schema instead of "
    "input_word_ids for dynamic masking.",
)
_DUPE_FACTOR = flags.DEFINE_integer(
    "dupe_factor", 1, "With --static_masking: masked copies per sequence."
)
_MAX_PREDICTIONS = flags.DEFINE_integer(
    "max_predictions_per_seq", 20, "With --static_masking: masked positions."
)
_MASK_RATE = flags.DEFINE_float(
    "mask_rate", 0.15, "With --static_masking: masked fraction."
)
_LOWERCASE = flags.DEFINE_boolean(
    "lowercase", False, "Lowercase and strip accents (match the vocabulary)."
)
_COMPRESSION = flags.DEFINE_enum(
    "compression", "none", ["none", "gzip"], "TFRecord compression."
)
_OVERWRITE = flags.DEFINE_boolean(
    "overwrite", False, "Replace the shards of an existing --output_dir."
)
flags.mark_flags_as_required(["vocab_file", "output_dir"])
flags.register_validator(
    "max_seq_length", lambda v: v >= 8, message="--max_seq_length must be >= 8."
)
flags.register_validator(
    "num_shards", lambda v: v >= 1, message="--num_shards must be >= 1."
)
flags.register_validator(
    "dupe_factor", lambda v: v >= 1, message="--dupe_factor must be >= 1."
)
flags.register_validator(
    "mask_rate", lambda v: 0 < v < 1, message="--mask_rate must be in (0, 1)."
)
flags.register_validator(
    "max_predictions_per_seq",
    lambda v: v >= 1,
    message="--max_predictions_per_seq must be >= 1.",
)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    if _DUPE_FACTOR.value > 1 and not _STATIC_MASKING.value:
        raise app.UsageError(
            "--dupe_factor needs --static_masking (dynamic "
            "masking draws new masks every epoch)."
        )
    config = shards_lib.ShardConfig(
        input_patterns=_INPUT.value,
        vocab_file=_VOCAB_FILE.value,
        output_dir=_OUTPUT_DIR.value,
        max_seq_length=_MAX_SEQ_LENGTH.value,
        num_shards=_NUM_SHARDS.value,
        seed=_SEED.value,
        static_masking=_STATIC_MASKING.value,
        dupe_factor=_DUPE_FACTOR.value,
        max_predictions_per_seq=_MAX_PREDICTIONS.value,
        mask_rate=_MASK_RATE.value,
        lowercase=_LOWERCASE.value,
        compression=_COMPRESSION.value,
        overwrite=_OVERWRITE.value,
    )

    import tensorflow  # noqa: F401 (imported before the clock starts)

    # Timed from here: the shard building itself, without TensorFlow's import.
    start = time.time()
    try:
        manifest = shards_lib.build_shards(config)
    except (FileNotFoundError, FileExistsError, ValueError) as e:
        sys.exit(f"build_shards: error: {e}")
    seconds = time.time() - start
    stats = manifest["stats"]
    summary = {
        "output_dir": config.output_dir,
        "examples": manifest["num_examples"],
        "shards": len(manifest["shards"]),
        "fill_ratio": stats["fill_ratio"],
        "text_tokens": stats["text_tokens"],
        "unk_tokens": stats["unk_tokens"],
        "invalid_utf8_lines_replaced": stats["corpus"]["invalid_utf8_lines"],
        "input_bytes": stats["corpus"]["bytes_read"],
        "seconds": round(seconds, 2),
    }
    print(json.dumps(summary, indent=2))
    # Shards and manifest are closed: skip the ~1 s interpreter teardown.
    process_startup.exit_without_teardown(0)


if __name__ == "__main__":
    app.run(main)
