"""What differs between Keras backends.

What only the TensorFlow backend can do is refused clearly on the others.

The model core (`tupe_tf.layers`, `tupe_tf.models`) runs on every Keras
backend. SavedModel and TF Hub export and `tf.distribute` strategies are
TensorFlow's own: their entry points call `require_tensorflow` first, so
under `KERAS_BACKEND=jax` or `=torch` they fail with one message that says
what to do, not deep inside TensorFlow with a JAX or PyTorch tensor.

Keras initializers draw other numbers on every backend (each has its own
random generator); `assign_seeded_weights` gives a model the same weights
on all of them, so that their outputs and training steps can be compared.

Example:
>>> from tupe_tf.utils.backend import require_tensorflow
>>> require_tensorflow("SavedModel export")  # no-op on TensorFlow
"""

import keras
import numpy as np

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


def assign_seeded_weights(model, seed=0, stddev=0.02, gamma_stddev=None):
    """Assigns every weight of a built `model` from NumPy's generator.

    Each weight is drawn from `N(0, stddev)` in `model.weights` order, and
    layer-norm scales (`gamma`) from `1 + N(0, gamma_stddev)`: the same
    numbers on every backend.

    Args:
        model: a built Keras model or layer.
        seed: int. The seed of `numpy.random.default_rng`.
        stddev: float. The standard deviation of the draws.
        gamma_stddev: float. That of the layer-norm scales (None: `stddev`).

    Example:
    >>> assign_seeded_weights(model, seed=0)  # doctest: +SKIP
    """
    if gamma_stddev is None:
        gamma_stddev = stddev
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        if "gamma" in variable.path:
            value = 1.0 + rng.normal(0.0, gamma_stddev, variable.shape)
        else:
            value = rng.normal(0.0, stddev, variable.shape)
        variable.assign(value.astype(variable.dtype))
