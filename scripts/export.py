r"""Exports a tupe-tf preset as a SavedModel, an ONNX or a LiteRT model.

Formats:
  serving           raw strings in (`serving_default`), float32 out:
                    logits/probabilities (classifier presets) or
                    pooled/sequence outputs (backbone and masked-LM presets).
  hub_encoder       TF Hub-style reusable encoder (input_word_ids,
                    input_mask, input_type_ids -> pooled_output,
                    sequence_output, encoder_outputs, default).
  hub_preprocessor  the matching TF Hub-style preprocessor (__call__,
                    tokenize, bert_pack_inputs; vocabulary as an asset).
  onnx              model.onnx for ONNX Runtime; litert: model.tflite for
  litert            the LiteRT interpreter. token_ids, segment_ids,
                    padding_mask in (int32 [batch, seq]); sequence_output,
                    pooled_output (or a classifier's logits, probabilities)
                    out. Length fixed to --seq_length, or dynamic with
                    --nofold_positional_bias. Needs pip install -e ".[onnx]"
                    or ".[litert]".

Example:
  python scripts/export.py --preset=runs/sst2/preset --export_dir=out/sst2 \
      --format=serving --seq_length=128
  python scripts/export.py --preset=runs/mnli/preset --export_dir=out/mnli \
      --format=serving --text_fields=premise,hypothesis
  python scripts/export.py --preset=runs/sst2/preset \
      --export_dir=out/sst2_onnx --format=onnx
"""

import dataclasses
import os
from typing import Optional
from typing import Sequence

# TensorFlow reads this as it loads, with the imports below: no C++ INFO,
# WARNING or ERROR lines unless the user sets it.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from absl import logging  # noqa: E402

import tupe_tf.export  # noqa: E402
from tupe_tf.utils import cli  # noqa: E402
from tupe_tf.utils import config_flags  # noqa: E402
from tupe_tf.utils.errors import UserError  # noqa: E402
from tupe_tf.utils.fileio import make_writable_directory  # noqa: E402
from tupe_tf.utils.keyword_arguments import refuses_unknown_fields  # noqa: E402
from tupe_tf.utils.settings import Settings  # noqa: E402
from tupe_tf.utils.settings import at_least  # noqa: E402
from tupe_tf.utils.settings import refuse_ignored  # noqa: E402
from tupe_tf.utils.settings import setting  # noqa: E402


@refuses_unknown_fields
@dataclasses.dataclass
class ExportSettings(Settings):
    """The export flags: `tupe_tf.export.export_preset`'s arguments."""

    preset: str = setting("", help="Preset directory to export.", required=True)
    export_dir: str = setting(
        "", help="Output SavedModel directory.", required=True
    )
    format: str = setting(
        "",
        help="Export format.",
        choices=tupe_tf.export.FORMATS,
        required=True,
    )
    seq_length: int = setting(
        128,
        help="Packed sequence length, and the length whose position bias is "
        "folded into a constant.",
        valid=at_least(3),
    )
    text_fields: Optional[Sequence[str]] = setting(
        None,
        help="--format=serving: names of the string inputs, one (single "
        "texts) or two (pairs). Default: text.",
    )
    overwrite: bool = setting(False, help="Replace an existing --export_dir.")
    fold_positional_bias: bool = setting(
        True,
        help="Fold the content-free position bias at --seq_length "
        "(--nofold_positional_bias for comparisons). For onnx and litert it "
        "also fixes the file's length to --seq_length; without it the "
        "length is dynamic.",
    )

    def check_rules(self):
        refuse_ignored(
            self,
            ("fold_positional_bias",),
            self.format != "hub_preprocessor",
            "to the encoder formats (serving, hub_encoder, onnx, litert)",
        )
        if self.text_fields is not None and not 1 <= len(self.text_fields) <= 2:
            raise UserError("--text_fields takes one or two names.")
        if self.text_fields and self.format != "serving":
            raise UserError("--text_fields only applies to --format=serving.")


config_flags.define_flags(ExportSettings)


def export(settings):
    """Exports as `settings` say; a user error is a `UserError`."""
    settings.validate()
    if os.path.exists(settings.export_dir) and not settings.overwrite:
        raise UserError(
            f"--export_dir={settings.export_dir} already exists; pass "
            "--overwrite to replace it (only once the new export is complete)."
        )
    if not os.path.isdir(settings.preset):
        raise UserError(
            f"--preset={settings.preset} is not a directory. Pass a preset "
            "written by scripts/pretrain.py or save_to_preset."
        )
    parent = os.path.dirname(os.path.abspath(settings.export_dir))
    make_writable_directory(parent, "--export_dir's parent directory")
    logging.set_verbosity(logging.WARNING)  # tf.saved_model.save's INFO lines
    return tupe_tf.export.export_preset(
        settings.preset,
        settings.export_dir,
        settings.format,
        seq_length=settings.seq_length,
        overwrite=settings.overwrite,
        text_fields=settings.text_fields,
        fold_positional_bias=settings.fold_positional_bias,
    )


def main(argv):
    del argv  # cli.run refuses arguments that are not flags.
    settings = config_flags.config_from_flags(ExportSettings)
    return cli.run_main(
        export,
        settings,
        lambda path: print(f"Exported {settings.format} to {path}"),
    )


if __name__ == "__main__":
    cli.run(main)
