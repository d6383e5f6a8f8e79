"""SavedModel export of tupe-tf presets: serving, TF Hub encoder/preprocessor.

The public names load on first use (PEP 562): `FORMATS` alone does not
load Keras or TensorFlow (scripts/export.py reads its flags before).

Example:
```python
import tupe_tf.export
tupe_tf.export.export_preset("runs/sst2/preset", "out/sst2", "serving")
```
"""

from tupe_tf.utils import lazy_names

# The export formats `export_preset` writes.
FORMATS = ("serving", "hub_encoder", "hub_preprocessor")

# Public name -> the module that defines it.
_PUBLIC = {
    "LoadedPreset": "tupe_tf.export.export_lib",
    "atomic_export_dir": "tupe_tf.export.export_lib",
    "load_preset": "tupe_tf.export.export_lib",
    "read_export_metadata": "tupe_tf.export.export_lib",
    "export_preset": "tupe_tf.export.exporter",
    "build_hub_encoder": "tupe_tf.export.hub_encoder",
    "export_hub_encoder": "tupe_tf.export.hub_encoder",
    "BertTextPacker": "tupe_tf.export.hub_preprocessor",
    "export_hub_preprocessor": "tupe_tf.export.hub_preprocessor",
    "export_serving": "tupe_tf.export.serving",
}

__all__ = sorted(_PUBLIC) + ["FORMATS"]
__getattr__, __dir__ = lazy_names.module_functions(__name__, _PUBLIC, __all__)
