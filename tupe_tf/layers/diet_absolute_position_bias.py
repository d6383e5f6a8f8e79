"""DIET-ABS: low-rank per-head absolute position attention bias."""

import keras
from keras import ops

from tupe_tf.layers.initializers import with_seed_offset
from tupe_tf.layers.position_bias_layer import PositionBiasLayer
from tupe_tf.layers.sharing import SharedTables


@keras.saving.register_keras_serializable(package="tupe_tf")
class DietAbsolutePositionBias(SharedTables, PositionBiasLayer):
    """`beta[h,i,j] = (P_Q,h P_K,h^T)[i,j]` with `P_Q,h, P_K,h` in `R^{N x r}`.

    No projection, no LayerNorm, no scale (DIET, Chen et al. 2021). All
    sharing units are computed with one einsum per forward pass.

    Args:
        num_layers: int. Number of transformer layers.
        num_heads: int. Number of attention heads.
        max_sequence_length: int. `N`, the rows of each table.
        rank: int. `r`, the rank of the factorisation.
        sharing: str. `layer-wise` (one pair per head for all layers),
            `head-wise` (one pair per layer for its heads) or `none`.
        initializer: initializer of the tables (`P_K` with its seed offset
            by one: the two start independent, not equal).
        **kwargs: other keyword arguments passed to `keras.layers.Layer`.

    Returns:
        A float32 tensor `(units, 1, heads, n, n)`: `units` is 1 when shared
        by layers, else `num_layers`; `heads` is 1 for `head-wise`.

    Example:
    ```python
    layer = tupe_tf.layers.DietAbsolutePositionBias(
        num_layers=2, num_heads=4, max_sequence_length=128, rank=16)
    bias = layer(np.zeros((2, 16), "int32"))  # (1, 1, 4, 16, 16)
    ```
    """

    # The weights whose axis 2 holds the `N` positions (for
    # `models.context_extension`): attribute -> (position axis, layout).
    length_tables = {
        "query_positions": (2, "absolute"),
        "key_positions": (2, "absolute"),
    }

    def __init__(
        self,
        num_layers,
        num_heads,
        max_sequence_length,
        rank,
        sharing="layer-wise",
        initializer=None,
        **kwargs,
    ):
        super().__init__(max_sequence_length=max_sequence_length, **kwargs)
        if int(rank) < 1:
            raise ValueError(
                f"`position_rank` must be a positive integer. Received: {rank}"
            )
        self.rank = int(rank)
        self.init_tables(num_layers, num_heads, sharing, initializer)

    def build(self, input_shape=None):
        shape = (
            self.units,
            self.table_heads,
            self.max_sequence_length,
            self.rank,
        )
        self.query_positions = self.add_weight(
            name="query_positions", shape=shape, initializer=self.initializer
        )
        self.key_positions = self.add_weight(
            name="key_positions",
            shape=shape,
            initializer=with_seed_offset(self.initializer, 1),
        )
        self.built = True

    def compute_bias(self, sequence_length):
        query = self.query_positions[:, :, :sequence_length]
        key = self.key_positions[:, :, :sequence_length]
        bias = ops.einsum("uhir,uhjr->uhij", query, key)
        return ops.expand_dims(bias, 1)

    def get_config(self):
        config = super().get_config()
        config.update(rank=self.rank, **self.tables_config())
        return config
