"""Multi-head attention that adds a content-free bias to the logits."""

import math

import keras
from keras import ops

from tupe_tf.layers.rotary_position_tables import rotate
from tupe_tf.utils.keyword_arguments import refuse_unknown_keywords


@keras.saving.register_keras_serializable(package="tupe_tf")
class BiasedMultiHeadAttention(keras.layers.MultiHeadAttention):
    """`keras.layers.MultiHeadAttention` with an additive logit bias.

    Computes, per head,
    `softmax_j(c * (x_i W^Q)(x_j W^K)^T + beta[i, j])` over the keys that the
    boolean mask keeps, then BERT's attention-probability dropout. The
    projections and their variables are exactly those of the parent class,
    so weights copy over from a keras-hub BERT layer unchanged.

    Logits, bias and softmax are in float32 whatever the compute dtype; the
    mask stays boolean (no large negative folded into a low-precision bias).

    Args:
        num_heads: int. Number of attention heads.
        key_dim: int. Size of each head.
        content_scale: float or None. `c`; defaults to `1/sqrt(key_dim)`.
        **kwargs: other keyword arguments of `keras.layers.MultiHeadAttention`
            (`dropout`, initializers, ...).

    Call arguments:
        query: tensor `(batch, n, hidden)`.
        value: tensor `(batch, m, hidden)`.
        key: optional tensor `(batch, m, hidden)`; defaults to `value`.
        attention_mask: optional boolean tensor broadcastable to
            `(batch, heads, n, m)`; rank 2 `(batch, m)` is a key padding mask
            and rank 3 `(batch, n, m)` is keras' attention mask.
        attention_bias: optional float tensor broadcastable to
            `(batch, heads, n, m)`, e.g. `(1, heads, n, m)`.
        query_key_offsets: optional `(2, n, heads, key_dim)`: row 0 is added
            to the projected query, row 1 to the projected key (BERT-A^d's
            position terms; self-attention, so `n == m`).
        rotary_tables: optional `(2, n, 1, key_dim)` cos/sin tables of
            `RotaryPositionTables`: the projected query and key of each head
            are rotated (RoPE; self-attention, so `n == m`).
        return_attention_scores: bool. Also return the probabilities.
        training: bool. Dropout on when True.

    Example:
    ```python
    attention = tupe_tf.layers.BiasedMultiHeadAttention(num_heads=4, key_dim=8)
    x = np.random.rand(2, 16, 32).astype("float32")
    bias = np.zeros((1, 4, 16, 16), "float32")
    y = attention(x, x, attention_bias=bias)  # (2, 16, 32)
    ```
    """

    def __init__(self, num_heads, key_dim, content_scale=None, **kwargs):
        refuse_unknown_keywords(
            BiasedMultiHeadAttention,
            kwargs,
            parents=(keras.layers.MultiHeadAttention, keras.layers.Layer),
        )
        super().__init__(num_heads=num_heads, key_dim=key_dim, **kwargs)
        self.content_scale = content_scale
        self._content_scale = (
            content_scale
            if content_scale is not None
            else 1.0 / math.sqrt(float(key_dim))
        )

    def call(
        self,
        query,
        value,
        key=None,
        attention_mask=None,
        attention_bias=None,
        query_key_offsets=None,
        rotary_tables=None,
        return_attention_scores=False,
        training=None,
    ):
        if key is None:
            key = value
        logits = self.attention_logits(
            query, key, attention_bias, query_key_offsets, rotary_tables
        )
        value = self._value_dense(value)
        if attention_mask is not None:
            attention_mask = ops.cast(attention_mask, "bool")
            if len(attention_mask.shape) == 2:
                attention_mask = attention_mask[:, None, None, :]
            elif len(attention_mask.shape) == 3:
                attention_mask = attention_mask[:, None, :, :]
            # float32 here, so -1e9 is representable; masked keys get 0.
            logits = ops.where(attention_mask, logits, -1e9)
        probabilities = ops.softmax(logits, axis=-1)
        attention = ops.cast(probabilities, self.compute_dtype)
        attention = self._dropout_layer(attention, training=training)
        output = ops.einsum("bhqk,bkhd->bqhd", attention, value)
        output = self._output_dense(output)
        if return_attention_scores:
            return output, probabilities
        return output

    def attention_logits(
        self,
        query,
        key,
        attention_bias=None,
        query_key_offsets=None,
        rotary_tables=None,
    ):
        """float32 logits `c * q.k + beta`, `(batch, heads, n, m)`, unmasked.

        Used by `call`, and on its own to inspect attention (e.g. its rank).
        """
        query = self._query_dense(query)
        key = self._key_dense(key)
        if query_key_offsets is not None:
            offsets = ops.cast(query_key_offsets, query.dtype)
            query = query + offsets[0]
            key = key + offsets[1]
        if rotary_tables is not None:
            # The content scale rides on the query's tables: one pass less.
            query = rotate(query, rotary_tables, self._content_scale)
            key = rotate(key, rotary_tables)
        else:
            query = ops.multiply(
                query, ops.cast(self._content_scale, query.dtype)
            )
        logits = ops.cast(ops.einsum("bqhd,bkhd->bhqk", query, key), "float32")
        if attention_bias is not None:
            logits = logits + ops.cast(attention_bias, "float32")
        return logits

    def get_config(self):
        config = super().get_config()
        config.update({"content_scale": self.content_scale})
        return config
