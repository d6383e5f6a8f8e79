"""tupe-tf: TUPE and DIET positional encodings for keras-hub BERT encoders."""

from tupe_tf import layers
from tupe_tf.models import POSITION_ENCODINGS
from tupe_tf.models import SEGMENT_ENCODINGS
from tupe_tf.models import TupeBackbone
from tupe_tf.models import TupeMaskedLM
from tupe_tf.models import TupeMaskedLMPreprocessor
from tupe_tf.models import TupeTextClassifier
from tupe_tf.models import TupeTextClassifierPreprocessor
from tupe_tf.models import TupeTokenizer
from tupe_tf.models import check_preset
from tupe_tf.models import load_bert_weights
from tupe_tf.version import __version__
