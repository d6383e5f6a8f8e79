"""ALiBi, symmetric: `beta[h,i,j] = -m_h |i - j|`, fixed, for all layers."""

import keras
import numpy as np
import tensorflow as tf
from keras import ops
from keras_hub.layers import AlibiBias

from tupe_tf.layers.position_bias_layer import PositionBiasLayer


def alibi_slopes(num_heads):
    """keras-hub's ALiBi slopes `m_h` (`alibi_bias_max=8`), float32 NumPy.

    Read through `keras_hub.layers.AlibiBias`'s public call: on zero scores
    of two keys it adds `m_h * (0 - 1)` to the first key.
    """
    with tf.init_scope():  # eager even if a graph is being traced
        scores = np.zeros((1, num_heads, 1, 2), "float32")
        bias = AlibiBias(alibi_bias_max=8, dtype="float32")(scores)
        return -ops.convert_to_numpy(bias)[0, :, 0, 0].astype("float32")


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

    Call arguments:
        inputs: any tensor of shape `(batch, n, ...)`; only `n` is used.

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
