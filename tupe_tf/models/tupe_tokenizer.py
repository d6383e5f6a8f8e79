"""WordPiece tokenizer of the tupe-tf keras-hub family."""

import keras
from keras_hub.models import BertTokenizer
from keras_hub.tokenizers import WordPieceTokenizer

from tupe_tf.models.tupe_backbone import TupeBackbone
from tupe_tf.utils.keyword_arguments import PRESET_KEYWORDS
from tupe_tf.utils.keyword_arguments import refuses_unknown_keywords


@keras.saving.register_keras_serializable(package="tupe_tf")
@refuses_unknown_keywords(
    BertTokenizer,
    WordPieceTokenizer,
    keras.layers.Layer,
    extra_valid=PRESET_KEYWORDS,
)
class TupeTokenizer(BertTokenizer):
    """BERT's WordPiece tokenizer, registered for `TupeBackbone` presets.

    Identical to `keras_hub.models.BertTokenizer` (needs `[CLS]`, `[SEP]`,
    `[PAD]` and `[MASK]` in the vocabulary); it exists so that
    `TupeTokenizer.from_preset(dir)` and the preset loaders of keras-hub find
    the right class for a `TupeBackbone` preset.

    Args:
        vocabulary: list of strings or path of a one-token-per-line file.
        lowercase: bool. Lowercase (and strip accents) before splitting.
        **kwargs: other arguments of `keras_hub.models.BertTokenizer`.

    Example:
    ```python
    tokenizer = tupe_tf.TupeTokenizer(vocabulary="vocab.txt", lowercase=True)
    tokenizer(["the quick brown fox"])
    ```
    """

    backbone_cls = TupeBackbone
