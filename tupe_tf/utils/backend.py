"""What only the TensorFlow backend can do, refused clearly on the others.

The model core (`tupe_tf.layers`, `tupe_tf.models`) runs on every Keras
backend. SavedModel and TF Hub export and `tf.distribute` strategies are
TensorFlow's own: their entry points call `require_tensorflow` first, so
under `KERAS_BACKEND=jax` or `=torch` they fail with one message that says
what to do, not deep inside TensorFlow with a JAX or PyTorch tensor.

Example:
>>> from tupe_tf.utils.backend import require_tensorflow
>>> require_tensorflow("SavedModel export")  # no-op on TensorFlow
"""

import keras

from tupe_tf.utils.errors import UserError


def require_tensorflow(what):
    """Raises `UserError` unless Keras runs on TensorFlow.

    Args:
        what: str. What needs TensorFlow, e.g. "SavedModel export"; it
            starts the message.
    """
    backend = keras.backend.backend()
    if backend != "tensorflow":
        raise UserError(
            f"{what} needs the TensorFlow backend; Keras runs on {backend!r}. "
            "Set KERAS_BACKEND=tensorflow (before Python starts) and run it "
            "again."
        )
