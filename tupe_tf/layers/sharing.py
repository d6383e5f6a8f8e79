"""Parameter sharing of DIET's per-head tables across layers and heads."""

import keras

from tupe_tf.utils.backbone_options import POSITION_SHARINGS


def sharing_units(sharing, num_layers, num_heads):
    """Returns `(table_units, table_heads)` for a sharing mode.

    `layer-wise`: one table per head, shared by all layers -> `(1, H)`.
    `head-wise`: one table per layer, shared by its heads -> `(L, 1)`.
    `none`: one table per layer and head -> `(L, H)`.
    """
    if sharing not in POSITION_SHARINGS:
        raise ValueError(
            f"`position_sharing` must be one of {POSITION_SHARINGS}. "
            f"Received: position_sharing={sharing!r}"
        )
    units = 1 if sharing == "layer-wise" else num_layers
    heads = 1 if sharing == "head-wise" else num_heads
    return units, heads


class SharedTables:
    """The set-up of a layer of per-head tables shared as `sharing` says
    (the DIET biases and the segment bias): a mixin of their
    `keras.layers.Layer` classes.

    `init_tables` in `__init__` sets `num_layers`, `num_heads`, `sharing`,
    `units`, `table_heads` (`sharing_units`) and `initializer` (default
    BERT's `TruncatedNormal(stddev=0.02)`); `tables_config()` is their part
    of `get_config`; `bias_shape` is the bias layout `(units, 1,
    table_heads, n, n)`.

    Example:
    ```python
    class Bias(SharedTables, PositionBiasLayer):
        def __init__(self, num_layers, num_heads, max_sequence_length,
                     sharing="none", initializer=None, **kwargs):
            super().__init__(max_sequence_length=max_sequence_length, **kwargs)
            self.init_tables(num_layers, num_heads, sharing, initializer)
    ```
    """

    def init_tables(self, num_layers, num_heads, sharing, initializer):
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.sharing = sharing
        self.units, self.table_heads = sharing_units(
            sharing, num_layers, num_heads
        )
        self.initializer = keras.initializers.get(
            initializer or keras.initializers.TruncatedNormal(stddev=0.02)
        )

    def tables_config(self):
        return {
            "num_layers": self.num_layers,
            "num_heads": self.num_heads,
            "sharing": self.sharing,
            "initializer": keras.initializers.serialize(self.initializer),
        }

    def bias_shape(self, sequence_length):
        n = sequence_length
        return (self.units, 1, self.table_heads, n, n)
