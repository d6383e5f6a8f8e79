r"""Exports a tupe-tf preset as a SavedModel.

Formats:
  serving           raw strings in (`serving_default`), float32 out:
                    logits/probabilities (classifier presets) or
                    pooled/sequence outputs (backbone and masked-LM presets).
  hub_encoder       TF Hub-style reusable encoder (input_word_ids,
                    input_mask, input_type_ids -> pooled_output,
                    sequence_output, encoder_outputs, default).
  hub_preprocessor  the matching TF Hub-style preprocessor (__call__,
                    tokenize, bert_pack_inputs; vocabulary as an asset).

Example:
  python scripts/export.py --preset=runs/sst2/preset --export_dir=out/sst2 \
      --format=serving --seq_length=128
  python scripts/export.py --preset=runs/mnli/preset --export_dir=out/mnli \
      --format=serving --text_fields=premise,hypothesis
"""

import os
import sys

# Quiet TensorFlow's C++ start-up chatter unless the user asked for it.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app  # noqa: E402
from absl import flags  # noqa: E402
from absl import logging  # noqa: E402

import tupe_tf.export  # noqa: E402

_PRESET = flags.DEFINE_string("preset", None, "Preset directory to export.")
_EXPORT_DIR = flags.DEFINE_string(
    "export_dir", None, "Output SavedModel directory."
)
_FORMAT = flags.DEFINE_enum(
    "format", None, tupe_tf.export.FORMATS, "Export format."
)
_SEQ_LENGTH = flags.DEFINE_integer(
    "seq_length",
    128,
    "Packed sequence length, and the length whose "
    "position bias is folded into a constant.",
)
_TEXT_FIELDS = flags.DEFINE_list(
    "text_fields",
    None,
    "--format=serving: names of the string inputs, one "
    "(single texts) or two (pairs). Default: text.",
)
_OVERWRITE = flags.DEFINE_boolean(
    "overwrite", False, "Replace an existing --export_dir."
)
_FOLD = flags.DEFINE_boolean(
    "fold_positional_bias",
    True,
    "Fold the content-free position bias at "
    "--seq_length (--nofold_positional_bias for comparisons).",
)
flags.mark_flags_as_required(["preset", "export_dir", "format"])
flags.register_validator(
    "seq_length", lambda v: v >= 3, message="--seq_length must be >= 3."
)
flags.register_validator(
    "text_fields",
    lambda v: v is None or 1 <= len(v) <= 2,
    message="--text_fields takes one or two comma-separated names.",
)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    if _TEXT_FIELDS.value and _FORMAT.value != "serving":
        raise app.UsageError("--text_fields only applies to --format=serving.")
    if os.path.exists(_EXPORT_DIR.value) and not _OVERWRITE.value:
        sys.exit(
            f"export: error: --export_dir={_EXPORT_DIR.value} already "
            "exists; pass --overwrite to replace it."
        )
    if not os.path.isdir(_PRESET.value):
        sys.exit(f"export: error: --preset={_PRESET.value} is not a directory.")
    logging.set_verbosity(logging.WARNING)  # tf.saved_model.save's INFO lines
    try:
        path = tupe_tf.export.export_preset(
            _PRESET.value,
            _EXPORT_DIR.value,
            _FORMAT.value,
            seq_length=_SEQ_LENGTH.value,
            overwrite=_OVERWRITE.value,
            text_fields=_TEXT_FIELDS.value,
            fold_positional_bias=_FOLD.value,
        )
    except (FileExistsError, ValueError) as e:
        sys.exit(f"export: error (--preset={_PRESET.value}): {e}")
    print(f"Exported {_FORMAT.value} to {path}")


if __name__ == "__main__":
    app.run(main)
