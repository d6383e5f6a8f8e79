"""`ExportSettings`: the flags of `scripts/export.py`, and the export they
ask for (`export_preset`'s arguments, checked before anything is written).

Example:
```python
from tupe_tf.export import ExportSettings
ExportSettings(
    preset="runs/sst2/preset", export_dir="out/sst2", format="serving"
).run()
```
"""

import dataclasses
import os
from typing import Optional
from typing import Sequence

from tupe_tf.export.exporter import FORMATS
from tupe_tf.export.exporter import export_preset
from tupe_tf.utils.errors import UserError
from tupe_tf.utils.fileio import make_writable_directory
from tupe_tf.utils.keyword_arguments import refuses_unknown_fields
from tupe_tf.utils.settings import Settings
from tupe_tf.utils.settings import at_least
from tupe_tf.utils.settings import refuse_ignored
from tupe_tf.utils.settings import setting


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
        choices=FORMATS,
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

    def run(self):
        """Exports as the settings say; returns the export directory. A
        user error is a `UserError`."""
        self.validate()
        if os.path.exists(self.export_dir) and not self.overwrite:
            raise UserError(
                f"--export_dir={self.export_dir} already exists; pass "
                "--overwrite to replace it (only once the new export is "
                "complete)."
            )
        if not os.path.isdir(self.preset):
            raise UserError(
                f"--preset={self.preset} is not a directory. Pass a preset "
                "written by scripts/pretrain.py or save_to_preset."
            )
        parent = os.path.dirname(os.path.abspath(self.export_dir))
        make_writable_directory(parent, "--export_dir's parent directory")
        return export_preset(
            self.preset,
            self.export_dir,
            self.format,
            seq_length=self.seq_length,
            overwrite=self.overwrite,
            text_fields=self.text_fields,
            fold_positional_bias=self.fold_positional_bias,
        )
