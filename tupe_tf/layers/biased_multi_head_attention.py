"""Multi-head attention that adds a bias (and a hook's term) to the logits."""

import math

import keras
from keras import ops

from tupe_tf.layers import keras_internals
from tupe_tf.layers.rotary_position_tables import rotate
from tupe_tf.utils.keyword_arguments import refuse_unknown_keywords


@keras.saving.register_keras_serializable(package="tupe_tf")
class BiasedMultiHeadAttention(keras.layers.MultiHeadAttention):
    """`keras.layers.MultiHeadAttention` with an additive logit bias.

    Computes, per head,
    `softmax_j(c * (x_i W^Q)(x_j W^K)^T + beta[i, j])` over the keys that the
    boolean mask keeps, then BERT's attention-probability dropout; a
    `query_logits` hook adds a term that depends on the content as well
    (Shaw et al.'s relative keys). The projections and their variables are exactly those of the parent class,
    so weights copy over from a keras-hub BERT layer unchanged.

    Logits, bias and softmax are in float32 whatever the compute dtype; the
    mask stays boolean (no large negative folded into a low-precision bias).
    Where the backend fuses attention with a bias and a mask (JAX; see
    `use_fused_attention`), the same attention runs as one
    `keras.ops.dot_product_attention` unless dropout or the probabilities
    need the explicit path.

    Args:
        num_heads: int. Number of attention heads.
        key_dim: int. Size of each head.
        content_scale: float or None. `c`; defaults to `1/sqrt(key_dim)`.
        **kwargs: other keyword arguments of `keras.layers.MultiHeadAttention`
            (`value_dim`, `dropout`, `use_bias`, `output_shape`,
            initializers, regularizers, constraints, `seed`). Those of its
            features this attention does not compute are refused with a
            `ValueError`: `attention_axes` other than the sequence axis,
            `sliding_window`, `use_gate` and `flash_attention` (the fused
            path is chosen by `use_fused_attention`).

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
        query_logits: optional callable `f(query, key)` returning a logit
            term `(batch, heads, n, m)` that depends on the content, added
            like `attention_bias`. It gets the projected query and key
            `(batch, n|m, heads, key_dim)` after the offsets and rotation,
            the query already times `c` (so `c` scales its term too), e.g.
            `ShawRelativeLogits` (Shaw et al.'s `q_i . a_ij`); DeBERTa's
            position-to-content term would read the key.
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
        refuse_unsupported_features(kwargs)
        super().__init__(num_heads=num_heads, key_dim=key_dim, **kwargs)
        self.content_scale = content_scale

    @property
    def logit_scale(self):
        """`c`: `content_scale`, or `1/sqrt(key_dim)` when it is None."""
        if self.content_scale is not None:
            return self.content_scale
        return 1.0 / math.sqrt(float(self.key_dim))

    def call(
        self,
        query,
        value,
        key=None,
        attention_mask=None,
        attention_bias=None,
        query_key_offsets=None,
        rotary_tables=None,
        query_logits=None,
        return_attention_scores=False,
        training=None,
    ):
        if key is None:
            key = value
        query, key = self.scaled_query_key(
            query, key, query_key_offsets, rotary_tables
        )
        attention_bias = with_query_logits(
            attention_bias, query_logits, query, key
        )
        value = self.value_dense(value)
        if attention_mask is not None:
            attention_mask = ops.cast(attention_mask, "bool")
            # expand_dims, not `[:, None]`: LiteRT has no builtin for a
            # strided slice of a boolean tensor.
            if len(attention_mask.shape) == 2:
                attention_mask = ops.expand_dims(attention_mask, (1, 2))
            elif len(attention_mask.shape) == 3:
                attention_mask = ops.expand_dims(attention_mask, 1)
        if use_fused_attention(
            self.dropout,
            training,
            return_attention_scores,
            attention_bias is not None,
        ):
            output = ops.dot_product_attention(
                query,
                key,
                value,
                bias=attention_bias,
                mask=attention_mask,
                scale=1.0,  # already on the query
                flash_attention=flash_attention_setting(),
            )
            return self.output_dense(output)
        logits = query_key_logits(query, key, attention_bias)
        if attention_mask is not None:
            # float32 here, so -1e9 is representable; masked keys get 0.
            logits = ops.where(attention_mask, logits, -1e9)
        probabilities = ops.softmax(logits, axis=-1)
        attention = ops.cast(probabilities, self.compute_dtype)
        dropout = keras_internals.attention_dropout_layer(self)
        attention = dropout(attention, training=training)
        output = ops.einsum("bhqk,bkhd->bqhd", attention, value)
        output = self.output_dense(output)
        if return_attention_scores:
            return output, probabilities
        return output

    def scaled_query_key(
        self, query, key, query_key_offsets=None, rotary_tables=None
    ):
        """The projected query and key, each `(batch, n, heads, key_dim)`,
        offset or rotated, the query times the content scale `c`."""
        query = self.query_dense(query)
        key = self.key_dense(key)
        if query_key_offsets is not None:
            offsets = ops.cast(query_key_offsets, query.dtype)
            query = query + offsets[0]
            key = key + offsets[1]
        if rotary_tables is not None:
            # The content scale rides on the query's tables: one pass less.
            query = rotate(query, rotary_tables, self.logit_scale)
            key = rotate(key, rotary_tables)
        else:
            query = ops.multiply(query, ops.cast(self.logit_scale, query.dtype))
        return query, key

    def attention_logits(
        self,
        query,
        key,
        attention_bias=None,
        query_key_offsets=None,
        rotary_tables=None,
        query_logits=None,
    ):
        """float32 logits `c * q.k + beta`, `(batch, heads, n, m)`, unmasked.

        What the explicit path computes; on its own, to inspect attention
        (e.g. its rank).
        """
        query, key = self.scaled_query_key(
            query, key, query_key_offsets, rotary_tables
        )
        attention_bias = with_query_logits(
            attention_bias, query_logits, query, key
        )
        return query_key_logits(query, key, attention_bias)

    def get_config(self):
        config = super().get_config()
        config.update({"content_scale": self.content_scale})
        return config


def refuse_unsupported_features(kwargs):
    """Raises `ValueError` for a `keras.layers.MultiHeadAttention` argument
    whose feature `BiasedMultiHeadAttention.call` does not compute.

    The parent would take them and build for them (a gate projection,
    another attention axis), and this layer's own attention would then
    ignore them. Their defaults (and `attention_axes` of the sequence axis,
    which a built layer's config holds) pass.

    Args:
        kwargs: the constructor's keyword arguments.
    """
    axes = kwargs.get("attention_axes")
    if isinstance(axes, int):
        axes = (axes,)
    refused = {
        "attention_axes": axes is not None and tuple(axes) != (1,),
        "sliding_window": kwargs.get("sliding_window") is not None,
        "use_gate": bool(kwargs.get("use_gate", False)),
        "flash_attention": kwargs.get("flash_attention") is not None,
    }
    names = [name for name, refuse in refused.items() if refuse]
    if names:
        received = ", ".join(f"{name}={kwargs[name]!r}" for name in names)
        raise ValueError(
            "BiasedMultiHeadAttention computes its own attention over the "
            "sequence axis (a fused kernel where `use_fused_attention` "
            "allows it) and does not honour these arguments of "
            f"keras.layers.MultiHeadAttention: {received}."
        )


def with_query_logits(attention_bias, query_logits, query, key):
    """`attention_bias` plus the hook's term `query_logits(query, key)`.

    One float32 tensor, so both attention paths take it as their bias.
    """
    if query_logits is None:
        return attention_bias
    term = ops.cast(query_logits(query, key), "float32")
    if attention_bias is None:
        return term
    return ops.cast(attention_bias, "float32") + term


def query_key_logits(query, key, attention_bias=None):
    """float32 `q.k + beta`, `(batch, heads, n, m)`, of scaled projections."""
    logits = ops.cast(ops.einsum("bqhd,bkhd->bhqk", query, key), "float32")
    if attention_bias is not None:
        logits = logits + ops.cast(attention_bias, "float32")
    return logits


def use_fused_attention(dropout, training, return_attention_scores, has_bias):
    """Whether the attention runs `keras.ops.dot_product_attention` (fused)
    rather than the explicit float32 logits, mask, softmax and dropout.

    Both compute the same attention (to round-off). Per backend:

    - JAX: fused where there is an additive bias, unless attention dropout
      is on (training with `dropout > 0`; the fused op has none) or the
      probabilities are returned. Without a bias (a padding mask alone)
      cuDNN refuses the mask's shape and XLA's fallback is slower than the
      explicit path on GPU (docs/benchmarks.md), so the explicit path runs.
      Keras hands the bias and the boolean mask to
      `jax.nn.dot_product_attention`: cuDNN's fused kernel on GPUs that
      take it (Ampere or newer, float16/bfloat16 compute dtype, e.g.
      `mixed_bfloat16`), XLA's implementation elsewhere (CPU, TPU, float32).
      The logits and softmax are float32 there too; the float32 bias is
      cast to the compute dtype where it meets them.
    - PyTorch: explicit. Keras' op takes a bias or a mask, not both, and
      folding the mask into a low-precision bias is what SPEC forbids.
    - TensorFlow: explicit. Keras' op has no fused kernel there (the same
      einsums and softmax), so TensorFlow graphs, exports and numbers stay
      those of the explicit path.

    Args:
        dropout: float. The attention-probability dropout rate.
        training: the layer's `training` argument.
        return_attention_scores: bool. The probabilities are asked for.
        has_bias: bool. An additive bias (positions or segments) is given.
    """
    if keras.backend.backend() != "jax" or return_attention_scores:
        return False
    return has_bias and not (training and dropout > 0)


def flash_attention_setting():
    """`flash_attention` for `keras.ops.dot_product_attention`.

    None (Keras picks cuDNN where it can), except on JAX's TPU: there Keras'
    Splash kernel takes no bias and one padding mask for the whole batch,
    so it is turned off and XLA's implementation runs.
    """
    if keras.backend.backend() != "jax":
        return None
    import jax  # the device Keras' JAX op checks

    return False if jax.devices()[0].platform == "tpu" else None
