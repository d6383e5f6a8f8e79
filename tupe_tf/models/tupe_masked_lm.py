"""Masked language model of the tupe-tf keras-hub family."""

import keras
from keras_hub.models import BertMaskedLM
from keras_hub.models import Task

from tupe_tf.models.tupe_backbone import TupeBackbone
from tupe_tf.models.tupe_masked_lm_preprocessor import TupeMaskedLMPreprocessor
from tupe_tf.utils.keyword_arguments import refuses_unknown_keywords


@keras.saving.register_keras_serializable(package="tupe_tf")
@refuses_unknown_keywords(BertMaskedLM, Task)
class TupeMaskedLM(BertMaskedLM):
    """BERT's masked-LM head (tied to the token embedding) on a `TupeBackbone`.

    Same model as `keras_hub.models.BertMaskedLM`; registered so that
    `keras_hub.models.MaskedLM.from_preset(dir)` rebuilds it from a saved
    `TupeBackbone` preset.

    Args:
        backbone: a `tupe_tf.TupeBackbone`.
        preprocessor: a `tupe_tf.TupeMaskedLMPreprocessor` or `None`.
        **kwargs: other arguments of `keras_hub.models.BertMaskedLM`
            (`name`, `compile`, ...); a misspelt one is refused.

    Example:
    ```python
    masked_lm = tupe_tf.TupeMaskedLM(backbone, preprocessor=None)
    masked_lm.compile(optimizer="adam", weighted_metrics=["accuracy"])
    masked_lm.fit(dataset)
    masked_lm.save_to_preset("my_preset")
    ```
    """

    backbone_cls = TupeBackbone
    preprocessor_cls = TupeMaskedLMPreprocessor
