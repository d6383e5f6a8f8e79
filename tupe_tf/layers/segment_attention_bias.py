"""DIET's per-head segment attention (section 3.1)."""

import keras
from keras import ops

from tupe_tf.layers.sharing import SharedTables
from tupe_tf.utils.keyword_arguments import refuse_unknown_keywords


@keras.saving.register_keras_serializable(package="tupe_tf")
class SegmentAttentionBias(SharedTables, keras.layers.Layer):
    """`beta[b,h,i,j] = E_h[seg(b,i), seg(b,j)]`, `E` in `R^{H x S x S}`.

    Replaces the segment embedding at the input. This is the only part of
    the attention bias with a batch axis. Tables follow the sharing modes of
    the position tables.

    Args:
        num_layers: int. Number of transformer layers.
        num_heads: int. Number of attention heads.
        num_segments: int. `S`, the number of segment ids.
        sharing: str. `layer-wise`, `head-wise` or `none`.
        initializer: initializer of the tables.
        **kwargs: other keyword arguments passed to `keras.layers.Layer`.

    Call arguments:
        segment_ids: int tensor `(batch, n)`.

    Returns:
        A float32 tensor `(units, batch, heads, n, n)`.

    Example:
    ```python
    layer = tupe_tf.layers.SegmentAttentionBias(
        num_layers=2, num_heads=4, num_segments=2)
    bias = layer(np.array([[0, 0, 1, 1]]))  # (1, 1, 4, 4, 4)
    ```
    """

    def __init__(
        self,
        num_layers,
        num_heads,
        num_segments,
        sharing="layer-wise",
        initializer=None,
        **kwargs,
    ):
        refuse_unknown_keywords(SegmentAttentionBias, kwargs)
        kwargs["dtype"] = "float32"
        super().__init__(**kwargs)
        self.num_segments = num_segments
        self.init_tables(num_layers, num_heads, sharing, initializer)

    def build(self, input_shape=None):
        self.segment_pairs = self.add_weight(
            name="segment_pairs",
            shape=(
                self.units,
                self.table_heads,
                self.num_segments,
                self.num_segments,
            ),
            initializer=self.initializer,
        )
        self.built = True

    def call(self, segment_ids):
        one_hot = ops.one_hot(
            ops.cast(segment_ids, "int32"), self.num_segments, dtype="float32"
        )
        rows = ops.einsum("bis,uhst->ubhit", one_hot, self.segment_pairs)
        return ops.einsum("ubhit,bjt->ubhij", rows, one_hot)

    def get_config(self):
        config = super().get_config()
        config.pop("dtype", None)
        config.update(num_segments=self.num_segments, **self.tables_config())
        return config
