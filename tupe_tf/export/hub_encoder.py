"""TF Hub-style reusable text-encoder SavedModel of a `TupeBackbone`."""

import keras
import tensorflow as tf

from tupe_tf.export import export_lib
from tupe_tf.export.saved_model_root import SavedModelRoot
from tupe_tf.utils.backend import require_tensorflow

INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")


def encoder_input_specs():
    """Int32 `[batch, seq]` specs of the encoder's dict inputs."""
    return {
        name: tf.TensorSpec([None, None], tf.int32, name=name)
        for name in INPUT_NAMES
    }


def encoder_outputs_model(backbone):
    """The backbone's functional graph, also returning every layer's output.

    Args:
        backbone: a `tupe_tf.TupeBackbone`.

    Returns:
        A `keras.Model` on the backbone's inputs returning a dict with
        `sequence_output`, `pooled_output` and `encoder_outputs` (a list,
        one `[batch, seq, hidden]` tensor per transformer layer). It shares
        the backbone's layers and variables.

    Example:
    ```python
    model = encoder_outputs_model(backbone)
    layer_outputs = model(inputs)["encoder_outputs"]  # num_layers tensors
    ```
    """
    outputs = dict(backbone.output)
    outputs["encoder_outputs"] = [
        layer.output for layer in backbone.transformer_layers
    ]
    return keras.Model(backbone.input, outputs, name="encoder_outputs_model")


class EncoderFunctions:
    """Traceable forward passes of a backbone for the exported length.

    The content-free position bias depends only on the weights and the
    length, and `TupeBackbone.fold_positional_bias` turns it into a constant
    wherever the traced length is static and folded. Tracing and saving
    happen inside `export_lib.folded_positional_bias(backbone,
    [seq_length])`; then

    - inference branches on the length: at `seq_length` it runs a graph
      with a static length (the folded constant), at any other length the
      ordinary graph;
    - training always runs with a dynamic length, so the bias is computed
      from the weights and gradients reach them.

    Args:
        backbone: a `tupe_tf.TupeBackbone`.
        seq_length: int or None. The folded length; `None` never branches.
    """

    def __init__(self, backbone, seq_length):
        self.backbone = backbone
        self.seq_length = seq_length
        self.model = encoder_outputs_model(backbone)
        self.max_sequence_length = backbone.max_sequence_length
        self._has_position_bias = backbone.position_bias is not None

    def _forward(self, inputs, training):
        outputs = self.model(
            {
                "token_ids": inputs["input_word_ids"],
                "segment_ids": inputs["input_type_ids"],
                "padding_mask": inputs["input_mask"],
            },
            training=training,
        )
        outputs = dict(outputs)
        outputs["encoder_outputs"] = list(outputs["encoder_outputs"])
        outputs["default"] = outputs["pooled_output"]
        return outputs

    def call(self, inputs, training=False):
        """Forward pass, for tracing only."""
        # Loaded signatures do not check shapes; refuse other ranks here.
        inputs = {
            name: tf.ensure_shape(inputs[name], [None, None])
            for name in INPUT_NAMES
        }
        length = tf.shape(inputs["input_word_ids"])[1]
        tf.debugging.assert_less_equal(
            length,
            self.max_sequence_length,
            message=(
                "input_word_ids is longer than the encoder's "
                f"max_sequence_length={self.max_sequence_length}"
            ),
        )
        if training:
            # Hide any static length, so training never sees a constant.
            dynamic = {
                name: tf.raw_ops.PlaceholderWithDefault(
                    input=t, shape=[None, None]
                )
                for name, t in inputs.items()
            }
            return self._forward(dynamic, True)
        static_length = inputs["input_word_ids"].shape[1]
        if (
            self.seq_length is None
            or not self._has_position_bias
            or static_length is not None
        ):
            return self._forward(inputs, False)

        def at_folded_length():
            # A static length selects the folded constant in the backbone.
            fixed = {
                name: tf.ensure_shape(t, [None, self.seq_length])
                for name, t in inputs.items()
            }
            return self._forward(fixed, False)

        return tf.cond(
            tf.equal(length, self.seq_length),
            at_folded_length,
            lambda: self._forward(inputs, False),
        )


def _flat_outputs(outputs):
    # Signature outputs must be flat: one tensor per layer.
    outputs = dict(outputs)
    for index, tensor in enumerate(outputs.pop("encoder_outputs")):
        outputs[f"encoder_outputs_{index}"] = tensor
    return outputs


def build_hub_encoder(backbone, seq_length=128, fold_positional_bias=True):
    """The reusable SavedModel object of a TF Hub-style text encoder.

    Args:
        backbone: a `tupe_tf.TupeBackbone`.
        seq_length: int. Length whose position bias is folded.
        fold_positional_bias: bool. `False` keeps the bias computed from the
            weights at every call (for benchmarks).

    Returns:
        A trackable with `__call__(inputs, training=False)` on the dict
        `input_word_ids`, `input_mask`, `input_type_ids` (int32
        `[batch, seq]`) returning `pooled_output`, `sequence_output`,
        `encoder_outputs` (a list) and `default`; `serve(inputs)` and
        `call_training(inputs)` (the same with training False/True, for
        `keras.layers.TFSMLayer`); `variables`, `trainable_variables`,
        `regularization_losses`; and a flat `serving_default` signature
        (`encoder_outputs_<i>`) in `.signatures_to_save`. Build and save it
        inside `export_lib.folded_positional_bias(backbone, [seq_length])`.

    Example:
    ```python
    with export_lib.folded_positional_bias(backbone, [128]):
        root = build_hub_encoder(backbone, seq_length=128)
        signatures = root.signatures_to_save
        del root.signatures_to_save
        tf.saved_model.save(root, export_dir, signatures=signatures)
    ```
    """
    require_tensorflow("TF Hub encoder export")
    functions = EncoderFunctions(
        backbone, seq_length if fold_positional_bias else None
    )
    specs = encoder_input_specs()
    root = SavedModelRoot()
    # The tf.Variables behind the Keras variables (TF Hub reads these).
    root.variables = [v.value for v in functions.model.variables]
    root.trainable_variables = [
        v.value for v in functions.model.trainable_variables
    ]
    root.regularization_losses = []
    # `call` branches with `tf.cond` and on Python values only, so
    # AutoGraph's source conversion (slower than the trace) is skipped.
    root.__call__ = tf.function(
        lambda inputs, training=False: functions.call(inputs, training),
        autograph=False,
    )
    # TF Hub's reusable SavedModel API: traced for both training values.
    for training in (True, False):
        root.__call__.get_concrete_function(specs, training=training)
    root.__call__.get_concrete_function(specs)
    # The other endpoints call those traces instead of tracing the model
    # again.
    root.serve = tf.function(
        lambda inputs: root.__call__(inputs, False),
        input_signature=[specs],
        autograph=False,
    )
    root.call_training = tf.function(
        lambda inputs: root.__call__(inputs, True),
        input_signature=[specs],
        autograph=False,
    )
    root.signatures_to_save = {
        "serving_default": tf.function(
            lambda input_word_ids, input_mask, input_type_ids: _flat_outputs(
                root.__call__(
                    {
                        "input_word_ids": input_word_ids,
                        "input_mask": input_mask,
                        "input_type_ids": input_type_ids,
                    },
                    False,
                )
            ),
            input_signature=list(specs.values()),
            autograph=False,
        )
    }
    return root


def export_hub_encoder(
    backbone,
    export_dir,
    seq_length=128,
    overwrite=False,
    fold_positional_bias=True,
):
    """Writes a TF Hub-style reusable encoder SavedModel.

    Args:
        backbone: a `tupe_tf.TupeBackbone`.
        export_dir: str. Output directory (written atomically).
        seq_length: int. Length whose position bias is folded.
        overwrite: bool. Replace an existing `export_dir`.
        fold_positional_bias: bool. Fold the position bias at `seq_length`.

    Example:
    ```python
    export_hub_encoder(backbone, "out/encoder", seq_length=128)
    encoder = tf.saved_model.load("out/encoder")
    outputs = encoder({"input_word_ids": ids, "input_mask": mask,
                       "input_type_ids": types})
    ```
    """
    require_tensorflow("TF Hub encoder export")
    folded = [seq_length] if fold_positional_bias else []
    with (
        export_lib.atomic_export_dir(export_dir, overwrite) as tmp_dir,
        export_lib.folded_positional_bias(backbone, folded),
    ):
        root = build_hub_encoder(backbone, seq_length, fold_positional_bias)
        signatures = root.signatures_to_save
        del root.signatures_to_save
        tf.saved_model.save(root, tmp_dir, signatures=signatures)
        export_lib.write_export_metadata(
            tmp_dir,
            format="hub_encoder",
            seq_length=seq_length,
            fold_positional_bias=fold_positional_bias,
            position_encoding=backbone.position_encoding,
            num_layers=backbone.num_layers,
        )
