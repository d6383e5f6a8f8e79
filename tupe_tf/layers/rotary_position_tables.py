"""RoPE: the cos/sin tables of keras-hub's `RotaryEmbedding`, built once."""

import keras
import numpy as np
from keras import ops
from keras_hub.layers import RotaryEmbedding

from tupe_tf.layers.position_bias_layer import PositionBiasLayer
from tupe_tf.utils.backbone_options import ROPE_SCALINGS

# YaRN's ramp (Peng et al., 2023): dimensions turning fewer than
# `YARN_ALPHA` times over the trained length are interpolated, those turning
# more than `YARN_BETA` times are kept.
YARN_ALPHA, YARN_BETA = 1.0, 32.0


def rope_frequencies(
    head_dim, max_wavelength, scaling="none", factor=1.0, trained_length=None
):
    """The angle per position of each dimension pair, `w'_k` (SPEC).

    Args:
        head_dim: int. `d` (even).
        max_wavelength: float. The base `b`; `w_k = b^(-2k/d)`.
        scaling: str. One of `ROPE_SCALINGS`: `none` (`w_k`), `linear`
            (`w_k / s`, i.e. positions `i / s`), `ntk` (base
            `b * s^(d / (d - 2))`) or `yarn` (`(1 - gamma_k) w_k / s +
            gamma_k w_k`, `gamma_k = clip((r_k - alpha) / (beta - alpha),
            0, 1)`, `r_k = T w_k / (2 pi)`).
        factor: float. `s >= 1`.
        trained_length: int. `T`, for `yarn`.

    Returns:
        A float64 NumPy array `(d / 2,)`.
    """
    k = np.arange(head_dim // 2)
    base = float(max_wavelength)
    if scaling == "ntk":
        base *= factor ** (head_dim / (head_dim - 2))
    frequencies = base ** (-2.0 * k / head_dim)
    if scaling == "linear":
        return frequencies / factor
    if scaling == "yarn":
        rotations = trained_length * frequencies / (2 * np.pi)
        gamma = np.clip(
            (rotations - YARN_ALPHA) / (YARN_BETA - YARN_ALPHA), 0.0, 1.0
        )
        return (1 - gamma) * frequencies / factor + gamma * frequencies
    return frequencies


def rope_temperature(scaling="none", factor=1.0):
    """What queries and keys are each multiplied by: `0.1 ln(s) + 1` for
    `yarn` (logits by its square), 1 otherwise."""
    if scaling == "yarn":
        return 0.1 * float(np.log(factor)) + 1.0
    return 1.0


@keras.saving.register_keras_serializable(package="tupe_tf")
class RotaryPositionTables(PositionBiasLayer):
    """Rotary position tables `(cos, sin)` for every layer's query and key.

    RoPE (Su et al., RoFormer) rotates each head's query and key:
    `q'_i = R_i q_i`, `k'_j = R_j k_j`, where `R_i` turns the pair of
    dimensions `(k, k + d/2)` by the angle `i * w_k`,
    `w_k = max_wavelength^(-2k/d)` (keras-hub's half-split layout), so
    `q'_i . k'_j` depends on positions only through `j - i`.

    The tables depend only on the length, so this layer computes them once
    per forward pass for all layers; `BiasedMultiHeadAttention` applies
    them (`rotary_tables`). They come from keras-hub's `RotaryEmbedding`
    through its public call: rotating a vector of ones gives
    `cos - sin` in the first half and `cos + sin` in the second. The sines
    are stored with their first half negated, so that applying them is one
    roll and two products (`rotate`) instead of slicing, negating and
    concatenating the halves of every query and key.

    A model trained at length `T` can be evaluated at `s * T` with a
    length extension (`scaling`, see `rope_frequencies`): the scaled tables
    are `cos(i w'_k)` and `sin(i w'_k)`, and for `yarn` both are multiplied
    by the temperature `0.1 ln(s) + 1`, so that the rotated query and key
    each carry it (the logits its square). `scaling="none"` gives
    keras-hub's tables unchanged.

    Args:
        head_dim: int. `d`, the size of each head (even).
        max_sequence_length: int. The longest sequence supported.
        max_wavelength: float. The RoPE base wavelength (10000 in RoFormer).
        scaling: str. Length extension: `none`, `linear`, `ntk` or `yarn`.
        scaling_factor: float. `s >= 1`; only with a `scaling`.
        trained_length: int or None. `T`; required for `yarn`, refused
            otherwise.
        **kwargs: other keyword arguments passed to `keras.layers.Layer`.

    Returns:
        A float32 tensor `(2, n, 1, head_dim)`: the cosines `[cos, cos]`,
        then the signed sines `[-sin, sin]`.

    Example:
    ```python
    layer = tupe_tf.layers.RotaryPositionTables(
        head_dim=16, max_sequence_length=128)
    tables = layer(np.zeros((2, 12), "int32"))  # (2, 12, 1, 16)
    # Trained at 128, evaluated at 512.
    yarn = tupe_tf.layers.RotaryPositionTables(
        head_dim=16, max_sequence_length=512, scaling="yarn",
        scaling_factor=4.0, trained_length=128)
    ```
    """

    def __init__(
        self,
        head_dim,
        max_sequence_length,
        max_wavelength=10000,
        scaling="none",
        scaling_factor=1.0,
        trained_length=None,
        **kwargs,
    ):
        super().__init__(max_sequence_length=max_sequence_length, **kwargs)
        check_scaling(head_dim, scaling, scaling_factor, trained_length)
        if not max_wavelength > 0:
            raise ValueError(
                "`rope_max_wavelength` must be a positive number. Received: "
                f"rope_max_wavelength={max_wavelength!r}"
            )
        if head_dim % 2:
            raise ValueError(
                "RoPE rotates pairs of dimensions: the head size "
                f"`hidden_dim / num_heads` must be even. Received: {head_dim}"
            )
        self.head_dim = int(head_dim)
        self.max_wavelength = max_wavelength
        self.scaling = scaling
        self.scaling_factor = float(scaling_factor)
        self.trained_length = trained_length
        self.rotary_embedding = RotaryEmbedding(
            max_wavelength=max_wavelength, dtype="float32"
        )

    def compute_bias(self, sequence_length):
        cos, sin = (
            self._unscaled_cos_sin(sequence_length)
            if self.scaling == "none"
            else self._scaled_cos_sin(sequence_length)
        )
        return ops.stack(
            [
                ops.concatenate([cos, cos], axis=-1),
                ops.concatenate([-sin, sin], axis=-1),
            ]
        )

    def bias_shape(self, sequence_length):
        return (2, sequence_length, 1, self.head_dim)

    def _unscaled_cos_sin(self, sequence_length):
        """keras-hub's tables, `(n, 1, d/2)` each."""
        ones = ops.ones((1, sequence_length, 1, self.head_dim), "float32")
        rotated = self.rotary_embedding(ones)[0]  # (n, 1, d)
        half = self.head_dim // 2
        low, high = rotated[..., :half], rotated[..., half:]
        return (high + low) / 2.0, (high - low) / 2.0

    def _scaled_cos_sin(self, sequence_length):
        """`t cos(i w'_k)`, `t sin(i w'_k)`, `(n, 1, d/2)` each."""
        frequencies = rope_frequencies(
            self.head_dim,
            self.max_wavelength,
            self.scaling,
            self.scaling_factor,
            self.trained_length,
        )
        positions = ops.arange(sequence_length, dtype="float32")
        angles = positions[:, None, None] * ops.convert_to_tensor(
            frequencies.astype("float32")
        )
        temperature = rope_temperature(self.scaling, self.scaling_factor)
        return temperature * ops.cos(angles), temperature * ops.sin(angles)

    def content_free_bias(self, sequence_length):
        """Zeros `(1, 1, 1, n, n)`: RoPE adds no bias to the logits."""
        return ops.zeros((1, 1, 1, sequence_length, sequence_length))

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "head_dim": self.head_dim,
                "max_wavelength": self.max_wavelength,
                "scaling": self.scaling,
                "scaling_factor": self.scaling_factor,
                "trained_length": self.trained_length,
            }
        )
        return config


def check_scaling(head_dim, scaling, factor, trained_length):
    """Refuses a bad length extension, naming the backbone argument."""
    if scaling not in ROPE_SCALINGS:
        raise ValueError(
            f"`rope_scaling` must be one of {ROPE_SCALINGS}. Received: "
            f"rope_scaling={scaling!r}"
        )
    if not factor >= 1:
        raise ValueError(
            "`rope_scaling_factor` must be >= 1. Received: "
            f"rope_scaling_factor={factor!r}"
        )
    if scaling == "none" and factor != 1:
        raise ValueError(
            "`rope_scaling_factor` needs `rope_scaling` in "
            f"{ROPE_SCALINGS[1:]}. Received: rope_scaling_factor={factor!r} "
            "with rope_scaling='none'"
        )
    if (scaling == "yarn") != (trained_length is not None):
        raise ValueError(
            "`rope_trained_length` is required for rope_scaling='yarn' and "
            f"only for it. Received: rope_trained_length={trained_length!r} "
            f"with rope_scaling={scaling!r}"
        )
    if trained_length is not None and not trained_length >= 1:
        raise ValueError(
            "`rope_trained_length` must be >= 1. Received: "
            f"rope_trained_length={trained_length!r}"
        )
    if scaling == "ntk" and head_dim <= 2:
        raise ValueError(
            "rope_scaling='ntk' needs a head size above 2 (its exponent is "
            f"d / (d - 2)). Received: head size {head_dim}"
        )


def rotate(tensor, tables, scale=None):
    """Applies RoPE tables `(2, n, 1, d)` to `(batch, n, heads, d)`.

    `roll(x, d/2) * [-sin, sin]` is `[-x2, x1] * sin`, the rotation's
    second term. With `scale`, the result is also multiplied by it (folded
    into the small tables, not applied to the large tensor).
    """
    tables = ops.cast(tables, tensor.dtype)
    if scale is not None:
        tables = tables * ops.cast(scale, tensor.dtype)
    tensor = ops.convert_to_tensor(tensor)
    half = tensor.shape[-1] // 2
    # `roll(x, d/2)` as two slices: LiteRT has no builtin Roll.
    turned = ops.concatenate([tensor[..., half:], tensor[..., :half]], -1)
    return ops.add(
        ops.multiply(tensor, tables[0]), ops.multiply(turned, tables[1])
    )
