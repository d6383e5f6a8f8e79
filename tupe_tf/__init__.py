"""tupe-tf: TUPE and DIET positional encodings for keras-hub BERT encoders.

Importing `tupe_tf` registers its Keras classes (`tupe_tf>TupeBackbone`,
the tokenizers, preprocessors and tasks), so that keras-hub's own loaders,
`keras_hub.models.Backbone`, `MaskedLM` and `TextClassifier.from_preset`,
load its presets. It loads Keras and keras-hub (TensorFlow where it is
installed: the model core runs on JAX and PyTorch without it), as does
importing any of its subpackages, which runs this file first.

Example:
>>> import keras_hub, tupe_tf  # doctest: +SKIP
>>> backbone = tupe_tf.TupeBackbone(
...     vocabulary_size=100, num_layers=2, num_heads=2, hidden_dim=16,
...     intermediate_dim=32, position_encoding="tupe-r")  # doctest: +SKIP
>>> backbone.save_to_preset("preset")  # doctest: +SKIP
>>> keras_hub.models.Backbone.from_preset("preset")  # doctest: +SKIP
"""

from tupe_tf import layers
from tupe_tf.models import POSITION_ENCODINGS
from tupe_tf.models import SEGMENT_ENCODINGS
from tupe_tf.models import TupeBackbone
from tupe_tf.models import TupeFairseqTextClassifierPreprocessor
from tupe_tf.models import TupeFairseqTokenizer
from tupe_tf.models import TupeMaskedLM
from tupe_tf.models import TupeMaskedLMPreprocessor
from tupe_tf.models import TupeTextClassifier
from tupe_tf.models import TupeTextClassifierPreprocessor
from tupe_tf.models import TupeTokenizer
from tupe_tf.models import check_preset
from tupe_tf.models import load_bert_weights
from tupe_tf.models import load_tupe_reference_weights
from tupe_tf.version import __version__

__all__ = [
    "POSITION_ENCODINGS",
    "SEGMENT_ENCODINGS",
    "TupeBackbone",
    "TupeFairseqTextClassifierPreprocessor",
    "TupeFairseqTokenizer",
    "TupeMaskedLM",
    "TupeMaskedLMPreprocessor",
    "TupeTextClassifier",
    "TupeTextClassifierPreprocessor",
    "TupeTokenizer",
    "__version__",
    "check_preset",
    "layers",
    "load_bert_weights",
    "load_tupe_reference_weights",
]
