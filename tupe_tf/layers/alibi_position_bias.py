"""ALiBi, symmetric: `beta[h,i,j] = -m_h |i - j|`, fixed, for all layers."""

import keras
import numpy as np
from keras import ops

from tupe_tf.layers.position_bias_layer import PositionBiasLayer


def alibi_slopes(num_heads, alibi_bias_max=8):
    """keras-hub's ALiBi slopes `m_h` (those of `keras_hub.layers.AlibiBias`),
    float32 NumPy.

    For `H` a power of two, `m_h = 2^(-alibi_bias_max (h + 1) / H)`;
    otherwise the slopes of the largest power of two `P < H`, then every
    other slope of `2P` heads, up to `H` slopes. Constants: computed in
    NumPy, so building the layer runs no backend op.
    """

    def geometric(heads):
        return 2.0 ** (-alibi_bias_max * np.arange(1, heads + 1) / heads)

    power = 2 ** int(np.floor(np.log2(num_heads)))
    extra = geometric(2 * power)[0::2][: num_heads - power]
    return np.concatenate([geometric(power), extra]).astype("float32")


@keras.saving.register_keras_serializable(package="tupe_tf")
class AlibiPositionBias(PositionBiasLayer):
    """Bidirectional ALiBi (Press et al.; as in MosaicBERT).

    `beta[h,i,j] = -m_h * |i - j|` with keras-hub's slopes: for `H` a power
    of two `m_h = 2^(-8 (h + 1) / H)`, otherwise the original
    interpolation. No weights; the bias is a constant of the length, so an
    exported graph folds it like the learned biases.

    Args:
        num_heads: int. Number of attention heads.
        max_sequence_length: int. The longest sequence supported.
        **kwargs: other keyword arguments passed to `keras.layers.Layer`.

    Returns:
        A float32 tensor `(1, 1, num_heads, n, n)`.

    Example:
    ```python
    layer = tupe_tf.layers.AlibiPositionBias(
        num_heads=4, max_sequence_length=128)
    bias = layer(np.zeros((2, 12), "int32"))  # (1, 1, 4, 12, 12)
    ```
    """

    def __init__(self, num_heads, max_sequence_length, **kwargs):
        super().__init__(max_sequence_length=max_sequence_length, **kwargs)
        self.num_heads = num_heads
        self._slopes = alibi_slopes(num_heads)
        self.built = True

    def compute_bias(self, sequence_length):
        # A few element-wise ops per forward pass (no N x N constant in
        # the graph); `fold` turns it into a constant for export.
        positions = ops.arange(sequence_length, dtype="float32")
        distance = ops.abs(positions[None, :] - positions[:, None])
        slopes = ops.convert_to_tensor(self._slopes)
        return (-slopes[:, None, None] * distance)[None, None]

    def get_config(self):
        config = super().get_config()
        config.update({"num_heads": self.num_heads})
        return config
