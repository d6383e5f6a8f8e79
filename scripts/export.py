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

Flags: `tupe_tf.export.ExportSettings`.
"""

import os

# TensorFlow reads this as it loads, with the imports below: no C++ INFO,
# WARNING or ERROR lines unless the user sets it.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from tupe_tf.export import ExportSettings  # noqa: E402
from tupe_tf.utils import cli  # noqa: E402
from tupe_tf.utils import config_flags  # noqa: E402

config_flags.define_flags(ExportSettings)


def main(argv):
    del argv  # cli.run refuses arguments that are not flags.
    settings = config_flags.config_from_flags(ExportSettings)
    return cli.run_main(
        ExportSettings.run,
        settings,
        lambda path: print(f"Exported {settings.format} to {path}"),
    )


if __name__ == "__main__":
    cli.run(main)
