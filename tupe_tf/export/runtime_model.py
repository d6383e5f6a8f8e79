"""`RuntimeModel`: what the ONNX and LiteRT exports convert."""

import keras
import tensorflow as tf

INPUT_NAMES = ("token_ids", "segment_ids", "padding_mask")


class RuntimeModel(keras.Model):
    """A preset's encoder or classifier on token ids, for converters.

    Takes keras-hub's dict of int32 `[batch, seq]` `token_ids`,
    `segment_ids` and `padding_mask`, and returns float32
    `sequence_output` and `pooled_output` (an encoder) or `logits` and
    `probabilities` (a classifier, as the serving SavedModel does).

    Traced at a static length (`runtime_input_signature(seq_length)`),
    a backbone whose position bias is folded there
    (`export_lib.folded_positional_bias`) uses the constant; traced at a
    dynamic length, the bias is computed from the weights at each call.
    (One file holding both, as the SavedModel does with `tf.cond`, does not
    convert: LiteRT prepares both branches of an `IF` for the call's
    shape.)

    Args:
        backbone: a `tupe_tf.TupeBackbone`.
        classifier: a `keras_hub.models.TextClassifier` on `backbone`, or
            `None` for the encoder outputs.

    Example:
    ```python
    with export_lib.folded_positional_bias(backbone, [128]):
        model = RuntimeModel(backbone)
        model.build_for_export(128)
        model.export("encoder.onnx", format="onnx",
                     input_signature=[runtime_input_signature(128)])
    ```
    """

    def __init__(self, backbone, classifier=None):
        super().__init__(name="runtime_model")
        self.backbone = backbone
        self.classifier = classifier
        if classifier is not None:
            output_dense = classifier.output_dense
            self.features = keras.Model(classifier.input, output_dense.input)
            self.output_dense = output_dense

    def _outputs(self, inputs):
        if self.classifier is None:
            outputs = self.backbone(inputs, training=False)
            return {
                "sequence_output": tf.cast(
                    outputs["sequence_output"], tf.float32
                ),
                "pooled_output": tf.cast(outputs["pooled_output"], tf.float32),
            }
        # The final dense layer's pre-activation, whatever the classifier's
        # `activation`.
        hidden = self.features(inputs, training=False)
        logits = tf.matmul(hidden, self.output_dense.kernel)
        logits = tf.cast(logits + self.output_dense.bias, tf.float32)
        if logits.shape[-1] == 1:
            probabilities = tf.sigmoid(logits)
        else:
            probabilities = tf.nn.softmax(logits, axis=-1)
        return {"logits": logits, "probabilities": probabilities}

    def call(self, inputs):
        return self._outputs({name: inputs[name] for name in INPUT_NAMES})

    def build_for_export(self, length=3):
        """Builds the model with one call (Keras exports built models)."""
        self({name: tf.ones([1, length], tf.int32) for name in INPUT_NAMES})


def runtime_input_signature(seq_length=None):
    """The dict of int32 `InputSpec`s, dynamic batch (and length)."""
    return {
        name: keras.InputSpec(
            shape=(None, seq_length), dtype="int32", name=name
        )
        for name in INPUT_NAMES
    }
