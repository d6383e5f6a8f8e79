"""Exports of tupe-tf presets: SavedModels (serving, TF Hub encoder and
preprocessor), ONNX and LiteRT.

Example:
```python
import tupe_tf.export
tupe_tf.export.export_preset("runs/sst2/preset", "out/sst2", "serving")
```
"""

from tupe_tf.export.export_lib import LoadedPreset
from tupe_tf.export.export_lib import atomic_export_dir
from tupe_tf.export.export_lib import load_preset
from tupe_tf.export.export_lib import read_export_metadata
from tupe_tf.export.export_settings import ExportSettings
from tupe_tf.export.exporter import FORMATS
from tupe_tf.export.exporter import export_preset
from tupe_tf.export.hub_encoder import build_hub_encoder
from tupe_tf.export.hub_encoder import export_hub_encoder
from tupe_tf.export.hub_preprocessor import BertTextPacker
from tupe_tf.export.hub_preprocessor import export_hub_preprocessor
from tupe_tf.export.runtimes import export_runtime
from tupe_tf.export.runtimes import load_runtime_model
from tupe_tf.export.serving import export_serving

__all__ = [
    "FORMATS",
    "BertTextPacker",
    "ExportSettings",
    "LoadedPreset",
    "atomic_export_dir",
    "build_hub_encoder",
    "export_hub_encoder",
    "export_hub_preprocessor",
    "export_preset",
    "export_runtime",
    "export_serving",
    "load_preset",
    "load_runtime_model",
    "read_export_metadata",
]
