"""Loading tupe-tf SavedModel exports as Keras 3 layers."""

import os

import keras

# The exported preprocessing graphs use TF-Text ops; importing the package
# registers them before the SavedModel is loaded.
import tensorflow_text  # noqa: F401

from tupe_tf.export.export_lib import read_export_metadata
from tupe_tf.utils.errors import UserError

# Endpoints per export format: (inference, training or None).
_ENDPOINTS = {
    "hub_encoder": ("serve", "call_training"),
    "hub_preprocessor": ("__call__", None),
    "serving": ("serve", None),
}


def load(path, trainable=False):
    """Loads a tupe-tf export as a Keras 3 layer.

    A `keras.layers.TFSMLayer` on the export's endpoint: the encoder takes
    the dict `input_word_ids`, `input_mask`, `input_type_ids` and returns
    `pooled_output`, `sequence_output`, `encoder_outputs`, `default`; the
    preprocessor takes a `[batch]` string tensor and returns the packed
    encoder inputs; a serving export takes the dict of its text fields.

    Args:
        path: str. A directory written by `tupe_tf.export`.
        trainable: bool. Make the encoder's variables trainable; with
            `training=True` the layer then runs the export's training graph
            (dropout on, position bias computed from the weights). Only
            `hub_encoder` exports can be trained.

    Returns:
        A `keras.layers.TFSMLayer`.

    Raises:
        UserError: (a `ValueError`) `path` is not a tupe-tf export, or
            `trainable=True` for an export without trainable weights.

    Example:
    ```python
    preprocessor = tupe_tf.hub.load("out/preprocessor")
    encoder = tupe_tf.hub.load("out/encoder", trainable=True)
    text = keras.Input(shape=(), dtype="string")
    pooled = encoder(preprocessor(text))["pooled_output"]
    ```
    """
    metadata = read_export_metadata(path)
    if metadata is None:
        if not os.path.isdir(path):
            raise UserError(f"Export directory {path!r} does not exist.")
        raise UserError(
            f"{path!r} is not a tupe-tf export (no "
            "assets.extra/tupe_tf_export.json). Use "
            "`keras.layers.TFSMLayer` directly for other SavedModels."
        )
    export_format = metadata.get("format")
    if export_format not in _ENDPOINTS:
        raise UserError(
            f"{path!r} has unknown export format {export_format!r}."
        )
    call_endpoint, training_endpoint = _ENDPOINTS[export_format]
    if trainable and training_endpoint is None:
        raise UserError(
            f"`trainable=True` needs a hub_encoder export; {path!r} is a "
            f"{export_format} export."
        )
    return keras.layers.TFSMLayer(
        path,
        call_endpoint=call_endpoint,
        call_training_endpoint=training_endpoint if trainable else None,
        trainable=trainable,
        name=f"tupe_tf_{export_format}",
    )
