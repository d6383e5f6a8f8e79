"""RoPE: the cos/sin tables of keras-hub's `RotaryEmbedding`, built once."""

import keras
from keras import ops
from keras_hub.layers import RotaryEmbedding

from tupe_tf.layers.position_bias_layer import PositionBiasLayer


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

    Args:
        head_dim: int. `d`, the size of each head (even).
        max_sequence_length: int. The longest sequence supported.
        max_wavelength: float. The RoPE base wavelength (10000 in RoFormer).
        **kwargs: other keyword arguments passed to `keras.layers.Layer`.

    Call arguments:
        inputs: any tensor of shape `(batch, n, ...)`; only `n` is used.

    Returns:
        A float32 tensor `(2, n, 1, head_dim)`: the cosines `[cos, cos]`,
        then the signed sines `[-sin, sin]`.

    Example:
    ```python
    layer = tupe_tf.layers.RotaryPositionTables(
        head_dim=16, max_sequence_length=128)
    tables = layer(np.zeros((2, 12), "int32"))  # (2, 12, 1, 16)
    ```
    """

    def __init__(
        self, head_dim, max_sequence_length, max_wavelength=10000, **kwargs
    ):
        super().__init__(max_sequence_length=max_sequence_length, **kwargs)
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
        self.rotary_embedding = RotaryEmbedding(
            max_wavelength=max_wavelength, dtype="float32"
        )

    def compute_bias(self, sequence_length):
        ones = ops.ones((1, sequence_length, 1, self.head_dim), "float32")
        rotated = self.rotary_embedding(ones)[0]  # (n, 1, d)
        half = self.head_dim // 2
        low, high = rotated[..., :half], rotated[..., half:]
        cos, sin = (high + low) / 2.0, (high - low) / 2.0
        return ops.stack(
            [
                ops.concatenate([cos, cos], axis=-1),
                ops.concatenate([-sin, sin], axis=-1),
            ]
        )

    def content_free_bias(self, sequence_length):
        """Zeros `(1, 1, 1, n, n)`: RoPE adds no bias to the logits."""
        return ops.zeros((1, 1, 1, sequence_length, sequence_length))

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "head_dim": self.head_dim,
                "max_wavelength": self.max_wavelength,
            }
        )
        return config


def rotate(tensor, tables, scale=None):
    """Applies RoPE tables `(2, n, 1, d)` to `(batch, n, heads, d)`.

    `roll(x, d/2) * [-sin, sin]` is `[-x2, x1] * sin`, the rotation's
    second term. With `scale`, the result is also multiplied by it (folded
    into the small tables, not applied to the large tensor).
    """
    tables = ops.cast(tables, tensor.dtype)
    if scale is not None:
        tables = tables * ops.cast(scale, tensor.dtype)
    half = tensor.shape[-1] // 2
    turned = ops.roll(tensor, half, axis=-1)
    return tensor * tables[0] + turned * tables[1]
