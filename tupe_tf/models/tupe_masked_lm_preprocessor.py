"""Masked-LM preprocessor of the tupe-tf keras-hub family."""

import keras
from keras_hub.models import BertMaskedLMPreprocessor

from tupe_tf.models.tupe_backbone import TupeBackbone
from tupe_tf.models.tupe_tokenizer import TupeTokenizer
from tupe_tf.utils.keyword_arguments import PRESET_KEYWORDS
from tupe_tf.utils.keyword_arguments import refuses_unknown_keywords


@keras.saving.register_keras_serializable(package="tupe_tf")
@refuses_unknown_keywords(
    BertMaskedLMPreprocessor, keras.layers.Layer, extra_valid=PRESET_KEYWORDS
)
class TupeMaskedLMPreprocessor(BertMaskedLMPreprocessor):
    """keras-hub's BERT masked-LM preprocessor for `TupeBackbone`.

    Tokenizes raw strings, packs `[CLS] a [SEP] (b [SEP])`, and masks
    dynamically (see `keras_hub.models.BertMaskedLMPreprocessor` for all
    arguments).

    Args:
        tokenizer: a `tupe_tf.TupeTokenizer`.
        sequence_length: int. Packed length.
        **kwargs: other arguments of `BertMaskedLMPreprocessor`
            (`mask_selection_rate`, `mask_token_rate`, ...).

    Example:
    ```python
    preprocessor = tupe_tf.TupeMaskedLMPreprocessor(
        tupe_tf.TupeTokenizer(vocabulary="vocab.txt"), sequence_length=128)
    x, y, sample_weight = preprocessor(["the quick brown fox"])
    ```
    """

    backbone_cls = TupeBackbone
    tokenizer_cls = TupeTokenizer
