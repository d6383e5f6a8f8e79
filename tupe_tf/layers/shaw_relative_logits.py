"""Shaw et al.'s relative key embeddings: the logit term `q_i . a_ij`."""

import keras
from keras import ops

from tupe_tf.utils.keyword_arguments import refuse_unknown_keywords


@keras.saving.register_keras_serializable(package="tupe_tf")
class ShawRelativeLogits(keras.layers.Layer):
    """Shaw, Uszkoreit & Vaswani (2018): `q_i . A[clip(j - i, -k, k) + k]`.

    One learned table `A` of `2k + 1` vectors of the head size `d`, shared
    by the heads of a layer (the paper's section 3.3); distances beyond `k`
    share the last vector on their side. The value-side table of the paper
    is left out (the DIET and TUPE papers: it did not help).

    The layer is a `BiasedMultiHeadAttention` `query_logits` hook: it gets
    the projected query already times the content scale `1/sqrt(d)`, so the
    term it returns is `q_i . a_ij / sqrt(d)`. It is computed as one
    `(batch, heads, n, 2r + 1)` product of the queries with the rows of `A`
    that the length can reach (`r = min(k, max(n, m) - 1)` when the lengths
    are known, else `k`), then one gather by distance: never a
    `(batch, heads, n, m, d)` tensor.

    Args:
        head_dim: int. `d`, the size of each head.
        max_distance: int >= 1. `k`, the largest distinguished distance.
        initializer: initializer of the table (BERT's by default).
        **kwargs: other keyword arguments passed to `keras.layers.Layer`.

    Call arguments:
        query: `(batch, n, heads, head_dim)`, the scaled projected query.
        key: `(batch, m, heads, head_dim)`, the projected key; only `m` is
            used.

    Returns:
        A float32 tensor `(batch, heads, n, m)`.

    Example:
    ```python
    layer = tupe_tf.layers.ShawRelativeLogits(head_dim=8, max_distance=4)
    query = np.random.rand(2, 12, 4, 8).astype("float32")
    logits = layer(query, query)  # (2, 4, 12, 12)
    ```
    """

    def __init__(self, head_dim, max_distance=128, initializer=None, **kwargs):
        refuse_unknown_keywords(ShawRelativeLogits, kwargs)
        super().__init__(**kwargs)
        self.head_dim = int(head_dim)
        self.max_distance = int(max_distance)
        self.initializer = keras.initializers.get(
            initializer or keras.initializers.TruncatedNormal(stddev=0.02)
        )

    def build(self, query_shape=None, key_shape=None):
        self.relative_keys = self.add_weight(
            name="relative_keys",
            shape=(2 * self.max_distance + 1, self.head_dim),
            initializer=self.initializer,
        )
        self.built = True

    def reach(self, query_length, key_length):
        """`r`: the largest distance that lengths `n`, `m` can hold, at most
        `k`; `k` when a length is unknown (None or a tensor)."""
        if isinstance(query_length, int) and isinstance(key_length, int):
            return min(self.max_distance, max(query_length, key_length) - 1)
        return self.max_distance

    def call(self, query, key):
        batch, n, heads = ops.shape(query)[:3]
        m = ops.shape(key)[1]
        r = self.reach(n, m)
        k = self.max_distance
        table = ops.cast(self.relative_keys[k - r : k + r + 1], query.dtype)
        # (batch, heads, n, 2r + 1): row i holds q_i . a for every distance.
        scores = ops.einsum("bqhd,rd->bhqr", query, table)
        scores = ops.reshape(scores, (batch, heads, -1))
        # Flat index of (i, clip(j - i, -r, r) + r) in the rows above.
        rows = ops.arange(n, dtype="int32")[:, None]
        distance = ops.arange(m, dtype="int32")[None, :] - rows
        index = rows * (2 * r + 1) + ops.clip(distance, -r, r) + r
        return ops.cast(ops.take(scores, index, axis=2), "float32")

    def compute_output_shape(self, query_shape, key_shape):
        return (query_shape[0], query_shape[2], query_shape[1], key_shape[1])

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "head_dim": self.head_dim,
                "max_distance": self.max_distance,
                "initializer": keras.initializers.serialize(self.initializer),
            }
        )
        return config
