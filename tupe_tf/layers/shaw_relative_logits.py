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
    `(batch, heads, n, n + m)` product of the queries with `A`'s rows for
    the distances `-(n - 1) .. m` (gathered from the small table, clipped),
    then the "skew" of Music Transformer and Transformer-XL: a reshape and
    a slice that move row `i`'s distances to key positions. Never a
    `(batch, heads, n, m, d)` tensor, and no gather over the
    `(batch, heads, ...)` scores: its gradient, a scatter-add, made the
    train step several times slower on a GPU.

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

    def call(self, query, key):
        batch, n, heads = ops.shape(query)[:3]
        m = ops.shape(key)[1]
        k = self.max_distance
        # Row t of `table` is distance t - (n - 1), for t < n + m; the last
        # one (distance m) is never read: it makes each row of the skew
        # below one longer than the m keys it keeps, for every n >= 1.
        distance = ops.arange(n + m, dtype="int32") - (n - 1)
        table = ops.take(self.relative_keys, ops.clip(distance, -k, k) + k, 0)
        scores = ops.einsum(
            "bqhd,td->bhqt", query, ops.cast(table, query.dtype)
        )
        # scores[i, t] sits at i * (n + m) + t of the flat row; the term
        # (i, j) needs t = j - i + n - 1, at (n - 1) + i * (n + m - 1) + j.
        flat = ops.reshape(scores, (batch, heads, n * (n + m)))
        flat = flat[:, :, n - 1 : n - 1 + n * (n + m - 1)]
        skewed = ops.reshape(flat, (batch, heads, n, n + m - 1))
        return ops.cast(skewed[..., :m], "float32")

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
