"""Text classifier of the tupe-tf keras-hub family."""

import keras
from keras_hub.models import BertTextClassifier
from keras_hub.models import Task

from tupe_tf.models.tupe_backbone import TupeBackbone
from tupe_tf.models.tupe_text_classifier_preprocessor import (
    TupeTextClassifierPreprocessor,
)
from tupe_tf.utils.keyword_arguments import refuses_unknown_keywords


@keras.saving.register_keras_serializable(package="tupe_tf")
@refuses_unknown_keywords(BertTextClassifier, Task)
class TupeTextClassifier(BertTextClassifier):
    """BERT's pooled-output classifier on a `TupeBackbone`.

    Same model as `keras_hub.models.BertTextClassifier`; registered so that
    `keras_hub.models.TextClassifier.from_preset(dir, num_classes=...)`
    rebuilds it from a `TupeBackbone` preset.

    Args:
        backbone: a `tupe_tf.TupeBackbone`.
        num_classes: int. Number of classes (1 for regression, e.g. STS-B,
            with `activation=None` and a regression loss).
        preprocessor: a `tupe_tf.TupeTextClassifierPreprocessor` or `None`.
        **kwargs: other arguments of `keras_hub.models.BertTextClassifier`
            (`activation`, `dropout`, ...); a misspelt one is refused.

    Example:
    ```python
    classifier = keras_hub.models.TextClassifier.from_preset(
        "my_preset", num_classes=2)
    classifier.fit(x=["good", "bad"], y=[1, 0], batch_size=2)
    ```
    """

    backbone_cls = TupeBackbone
    preprocessor_cls = TupeTextClassifierPreprocessor
