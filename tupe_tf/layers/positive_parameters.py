"""Learned kernel parameters kept positive as their authors' code keeps them.

KERPLE's `r1, r2` are the weights themselves, clamped to at least 0.01
after every update (`AtLeast`, the KERPLE code's in-place clamp); FIRE's
`c` and threshold enter through their absolute values. Either way an
optimizer step moves the parameter itself, at the authors' pace (a
`softplus(raw)` would scale each step by `sigmoid(raw)`, about `0.1` at
FIRE's initial `c = 0.1`).
"""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="tupe_tf")
class AtLeast(keras.constraints.Constraint):
    """Clamps a weight to `>= minimum` after each optimizer update.

    Args:
        minimum: float. The smallest value the weight keeps.

    Example:
    ```python
    weight = layer.add_weight(shape=(4,), constraint=AtLeast(0.01))
    ```
    """

    def __init__(self, minimum):
        self.minimum = float(minimum)

    def __call__(self, w):
        return ops.maximum(w, ops.cast(self.minimum, w.dtype))

    def get_config(self):
        return {"minimum": self.minimum}


def clamped_uniform_initializer(high, minimum, seed=None):
    """`max(U(0, high), minimum)`: the KERPLE code's `torch.rand() * high`
    as its first clamp leaves it.

    Args:
        high: float > minimum.
        minimum: float. The clamp.
        seed: int or None, for `keras.initializers.RandomUniform`.
    """
    uniform = keras.initializers.RandomUniform(0.0, high, seed=seed)

    def initializer(shape, dtype=None):
        value = ops.maximum(uniform(shape, dtype="float32"), minimum)
        return ops.cast(value, dtype or "float32")

    return initializer


def log1p_of_nonnegative(x):
    """`log(1 + x)` for `x >= 0`, for the distance transforms.

    Written as `log(1 + x)`, not `log1p`: ONNX has no Log1p operator, so
    tf2onnx refuses it. For `x >= 0` the two differ by at most about
    `6e-8` absolute (the rounding of `1 + x` in float32).
    """
    return ops.log(1.0 + x)
