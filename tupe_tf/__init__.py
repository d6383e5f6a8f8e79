"""tupe-tf: TUPE and DIET positional encodings for keras-hub BERT encoders.

The public names below load on first use (PEP 562), so that importing a
light subpackage, e.g. `tupe_tf.utils` from the data pipeline, does not
load Keras or the model code.

Example:
>>> import tupe_tf  # doctest: +SKIP
>>> backbone = tupe_tf.TupeBackbone(
...     vocabulary_size=100, num_layers=2, num_heads=2, hidden_dim=16,
...     intermediate_dim=32, position_encoding="tupe-r")  # doctest: +SKIP
"""

from tupe_tf.utils import lazy_names
from tupe_tf.version import __version__

# Public name -> the module that defines it.
_PUBLIC = {
    "layers": "tupe_tf.layers",
    "POSITION_ENCODINGS": "tupe_tf.models",
    "SEGMENT_ENCODINGS": "tupe_tf.models",
    "TupeBackbone": "tupe_tf.models",
    "TupeFairseqTextClassifierPreprocessor": "tupe_tf.models",
    "TupeFairseqTokenizer": "tupe_tf.models",
    "TupeMaskedLM": "tupe_tf.models",
    "TupeMaskedLMPreprocessor": "tupe_tf.models",
    "TupeTextClassifier": "tupe_tf.models",
    "TupeTextClassifierPreprocessor": "tupe_tf.models",
    "TupeTokenizer": "tupe_tf.models",
    "check_preset": "tupe_tf.models",
    "load_bert_weights": "tupe_tf.models",
    "load_tupe_reference_weights": "tupe_tf.models",
}

__all__ = sorted(_PUBLIC) + ["__version__"]
__getattr__, __dir__ = lazy_names.module_functions(__name__, _PUBLIC, __all__)
