"""Learned parameters kept positive by construction: `softplus(raw) + floor`.

Used by the learned kernels (KERPLE's `r1, r2`, FIRE's `c` and threshold).
The weight is the free `raw` value; the parameter is always
`softplus(raw) + MIN_POSITIVE`, so no raw value, however extreme, leaves
`(0, inf)` (softplus alone underflows to 0 below about -104 in float32).
"""

import keras
import numpy as np
from keras import ops

MIN_POSITIVE = 1e-6


def positive(raw):
    """The positive parameter of a raw weight: `softplus(raw) + 1e-6`."""
    return ops.softplus(raw) + MIN_POSITIVE


def log1p_of_nonnegative(x):
    """`log(1 + x)` for `x >= 0`, for the distance transforms.

    Written as `log(1 + x)`, not `log1p`: ONNX has no Log1p operator, so
    tf2onnx refuses it. For `x >= 0` the two differ by at most about
    `6e-8` absolute (the rounding of `1 + x` in float32).
    """
    return ops.log(1.0 + x)


def raw_of(value):
    """The raw value whose `positive` is `value` (> 1e-6), float32 NumPy."""
    value = np.asarray(value, "float64") - MIN_POSITIVE
    return np.log(np.expm1(value)).astype("float32")


def uniform_positive_initializer(low, high, seed=None):
    """An initializer of raw weights whose positive values are `U(low, high)`.

    Args:
        low: float > 1e-6. Smallest initial parameter.
        high: float > low. Largest initial parameter.
        seed: int or None, for `keras.initializers.RandomUniform`.
    """
    uniform = keras.initializers.RandomUniform(low, high, seed=seed)

    def initializer(shape, dtype=None):
        value = uniform(shape, dtype="float32")
        return ops.cast(
            ops.log(ops.expm1(value - MIN_POSITIVE)), dtype or "float32"
        )

    return initializer
