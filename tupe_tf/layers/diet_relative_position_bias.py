"""DIET-REL: per-head relative position scalars, no log-binning."""

import keras
import numpy as np
from keras import ops

from tupe_tf.layers.position_bias_layer import PositionBiasLayer
from tupe_tf.layers.sharing import SharedTables


@keras.saving.register_keras_serializable(package="tupe_tf")
class DietRelativePositionBias(SharedTables, PositionBiasLayer):
    """`beta[h,i,j] = R_h[clip(j - i, -(N-1), N-1)]`, `2N - 1` scalars per head.

    The Toeplitz bias of every sharing unit is built with ONE gather from
    the tables through an index matrix precomputed for the longest length
    (its top-left `n x n` block serves length `n`).

    Args:
        num_layers: int. Number of transformer layers.
        num_heads: int. Number of attention heads.
        max_sequence_length: int. `N`.
        sharing: str. `none` (one table per layer, the default for DIET-REL),
            `layer-wise` or `head-wise`.
        initializer: initializer of the tables.
        **kwargs: other keyword arguments passed to `keras.layers.Layer`.

    Returns:
        A float32 tensor `(units, 1, heads, n, n)`.

    Example:
    ```python
    layer = tupe_tf.layers.DietRelativePositionBias(
        num_layers=2, num_heads=4, max_sequence_length=128)
    bias = layer(np.zeros((2, 16), "int32"))  # (2, 1, 4, 16, 16)
    ```
    """

    # The weight whose axis 2 holds the `2N - 1` offsets `j - i` (for
    # `models.context_extension`): attribute -> (position axis, layout).
    length_tables = {"relative_positions": (2, "relative")}

    def __init__(
        self,
        num_layers,
        num_heads,
        max_sequence_length,
        sharing="none",
        initializer=None,
        **kwargs,
    ):
        super().__init__(max_sequence_length=max_sequence_length, **kwargs)
        self.init_tables(num_layers, num_heads, sharing, initializer)
        positions = np.arange(self.max_sequence_length)
        # Offset j - i into [0, 2N - 2]; within the model no clip is needed.
        self._index_matrix = (
            positions[None, :]
            - positions[:, None]
            + self.max_sequence_length
            - 1
        ).astype(np.int32)

    def build(self, input_shape=None):
        self.relative_positions = self.add_weight(
            name="relative_positions",
            shape=(
                self.units,
                self.table_heads,
                2 * self.max_sequence_length - 1,
            ),
            initializer=self.initializer,
        )
        self.built = True

    def compute_bias(self, sequence_length):
        index = ops.convert_to_tensor(self._index_matrix)
        index = index[:sequence_length, :sequence_length]
        bias = ops.take(self.relative_positions, index, axis=2)
        return ops.expand_dims(bias, 1)

    def get_config(self):
        config = super().get_config()
        config.update(self.tables_config())
        return config
