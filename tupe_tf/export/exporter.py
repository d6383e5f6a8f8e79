"""`export_preset`: one entry point for every export format."""

import os

from tupe_tf.export import export_lib
from tupe_tf.export import runtimes
from tupe_tf.export.hub_encoder import export_hub_encoder
from tupe_tf.export.hub_preprocessor import export_hub_preprocessor
from tupe_tf.export.serving import check_text_fields
from tupe_tf.export.serving import export_serving
from tupe_tf.utils import fileio
from tupe_tf.utils.backend import require_tensorflow
from tupe_tf.utils.errors import UserError

# The export formats `export_preset` writes.
FORMATS = (
    "serving",
    "hub_encoder",
    "hub_preprocessor",
    *runtimes.RUNTIME_FORMATS,
)


def export_preset(
    preset_dir,
    export_dir,
    export_format,
    seq_length=128,
    overwrite=False,
    text_fields=None,
    fold_positional_bias=True,
):
    """Exports a preset as a SavedModel, an ONNX or a LiteRT model.

    Args:
        preset_dir: str. A tupe-tf preset (backbone, masked-LM or
            classifier).
        export_dir: str. Output directory; written to a temporary sibling
            and renamed, so it is never half written.
        export_format: str. `serving`, `hub_encoder`, `hub_preprocessor`,
            `onnx` or `litert` (see `runtimes.export_runtime`).
        seq_length: int. Packed length (serving, preprocessor default) and
            the length whose position bias is folded (serving, encoder).
        overwrite: bool. Replace an existing `export_dir`.
        text_fields: for `serving`, one or two input names.
        fold_positional_bias: bool. Fold the position bias at `seq_length`.

    Returns:
        The absolute path of the export.

    Raises:
        UserError: (a `ValueError`) bad format, length or text fields, or
            a bad preset (missing file, other tupe-tf version).
        fileio.OutputExistsError (a `UserError` and `FileExistsError`):
            `export_dir` exists and `overwrite` is False.

    Example:
    ```python
    tupe_tf.export.export_preset("runs/pretrain/preset", "out/encoder",
                                 "hub_encoder", seq_length=128)
    ```
    """
    require_tensorflow("SavedModel export")
    if export_format not in FORMATS:
        raise UserError(
            f"`export_format` must be one of {FORMATS}. "
            f"Received: {export_format!r}"
        )
    if not isinstance(seq_length, int) or seq_length < 3:
        raise UserError(
            f"`seq_length` must be an int >= 3. Received: {seq_length!r}"
        )
    if export_format == "serving":
        text_fields = check_text_fields(text_fields)
    elif text_fields:
        raise UserError("`text_fields` only applies to the serving format.")
    # Refuse to start a long export that could not be moved into place.
    if os.path.exists(export_dir) and not overwrite:
        raise fileio.OutputExistsError(
            f"Export directory {os.path.abspath(export_dir)!r} already "
            "exists. Pass --overwrite (overwrite=True) to replace it."
        )
    preset = export_lib.load_preset(
        preset_dir,
        with_tokenizer=export_format
        not in ("hub_encoder", *runtimes.RUNTIME_FORMATS),
    )
    if seq_length > preset.backbone.max_sequence_length:
        raise UserError(
            f"`seq_length={seq_length}` exceeds the preset's "
            f"max_sequence_length={preset.backbone.max_sequence_length}."
        )
    if export_format == "serving":
        export_serving(
            preset,
            export_dir,
            seq_length,
            text_fields,
            overwrite,
            fold_positional_bias,
        )
    elif export_format == "hub_encoder":
        export_hub_encoder(
            preset.backbone,
            export_dir,
            seq_length,
            overwrite,
            fold_positional_bias,
        )
    elif export_format in runtimes.RUNTIME_FORMATS:
        runtimes.export_runtime(
            preset,
            export_dir,
            export_format,
            seq_length,
            overwrite,
            fold_positional_bias,
        )
    else:
        export_hub_preprocessor(
            preset.tokenizer, export_dir, seq_length, overwrite
        )
    return os.path.abspath(export_dir)
