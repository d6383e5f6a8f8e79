"""Text-classifier preprocessor of the tupe-tf keras-hub family."""

import keras
from keras_hub.models import BertTextClassifierPreprocessor

from tupe_tf.models.tupe_backbone import TupeBackbone
from tupe_tf.models.tupe_tokenizer import TupeTokenizer
from tupe_tf.utils.keyword_arguments import PRESET_KEYWORDS
from tupe_tf.utils.keyword_arguments import refuses_unknown_keywords


@keras.saving.register_keras_serializable(package="tupe_tf")
@refuses_unknown_keywords(
    BertTextClassifierPreprocessor,
    keras.layers.Layer,
    extra_valid=PRESET_KEYWORDS,
)
class TupeTextClassifierPreprocessor(BertTextClassifierPreprocessor):
    """keras-hub's BERT classifier preprocessor for `TupeBackbone`.

    Single sentences or pairs: pairs are packed `[CLS] a [SEP] b [SEP]` with
    segment ids 0/1, which feed either the segment embedding or DIET's
    per-head segment attention, as the backbone is configured.

    Args:
        tokenizer: a `tupe_tf.TupeTokenizer`.
        sequence_length: int. Packed length.
        **kwargs: other arguments of `BertTextClassifierPreprocessor`.

    Example:
    ```python
    preprocessor = tupe_tf.TupeTextClassifierPreprocessor(
        tupe_tf.TupeTokenizer(vocabulary="vocab.txt"), sequence_length=128)
    # A tuple passed to `__call__` reads as (x, y); pack pairs with `call`.
    x = preprocessor.call((["a premise"], ["a hypothesis"]))
    ```
    """

    backbone_cls = TupeBackbone
    tokenizer_cls = TupeTokenizer
