"""BERT's post-LayerNorm transformer encoder layer, taking an attention bias."""

import keras
from keras_hub.layers import TransformerEncoder

from tupe_tf.layers import keras_hub_internals
from tupe_tf.layers.biased_multi_head_attention import BiasedMultiHeadAttention
from tupe_tf.utils.keyword_arguments import refuse_unknown_keywords


@keras.saving.register_keras_serializable(package="tupe_tf")
class BiasedTransformerEncoder(TransformerEncoder):
    """keras-hub's `TransformerEncoder` with a biased self-attention.

    Same sublayers, names and variables as
    `keras_hub.layers.TransformerEncoder` (so BERT weights copy over), but
    the self-attention is a `BiasedMultiHeadAttention`: the call takes an
    additive `attention_bias` and optional position offsets for the query
    and key, and the padding mask is applied as a boolean key mask. A
    `query_logits` layer, owned by this layer, adds a logit term that
    depends on the projected query (e.g. `ShawRelativeLogits`).

    It is built by keras-hub's own `TransformerEncoder.build`, so every
    argument the parent takes has its effect here too (an upgrade's new
    regularizers, say); the parent has no hook for another attention layer,
    so the `keras.layers.MultiHeadAttention` it makes is replaced, unbuilt,
    by a `BiasedMultiHeadAttention` with the same arguments
    (`make_attention_layer`) as it is assigned, and the parent builds that.

    Args:
        intermediate_dim: int. Width of the feedforward layer.
        num_heads: int. Number of attention heads.
        content_scale: float or None. Scale of the content logits;
            defaults to `1/sqrt(head_dim)`.
        query_logits: optional layer, or its serialized config: the
            attention's `query_logits` hook, called with the scaled projected
            query and the projected key, each `(batch, n, heads, head_dim)`,
            and returning a logit term `(batch, heads, n, n)`.
        **kwargs: other keyword arguments of
            `keras_hub.layers.TransformerEncoder` (`dropout`, `activation`,
            `layer_norm_epsilon`, initializers, `normalize_first`).

    Call arguments:
        inputs: tensor `(batch, n, hidden)`.
        padding_mask: optional `(batch, n)`, 1/True for real tokens.
        attention_bias: optional float `(1 or batch, heads, n, n)`.
        query_key_offsets: optional `(2, n, heads, head_dim)`, added to the
            projected query (row 0) and key (row 1).
        rotary_tables: optional `(2, n, 1, head_dim)` RoPE cos/sin tables.
        training: bool.
        return_attention_scores: bool. Also return the attention
            probabilities `(batch, heads, n, n)`.

    Example:
    ```python
    layer = tupe_tf.layers.BiasedTransformerEncoder(
        intermediate_dim=64, num_heads=4)
    x = np.random.rand(2, 16, 32).astype("float32")
    y = layer(x, attention_bias=np.zeros((1, 4, 16, 16), "float32"))
    ```
    """

    def __init__(
        self,
        intermediate_dim,
        num_heads,
        content_scale=None,
        query_logits=None,
        **kwargs,
    ):
        refuse_unknown_keywords(
            BiasedTransformerEncoder,
            kwargs,
            parents=(TransformerEncoder, keras.layers.Layer),
        )
        super().__init__(
            intermediate_dim=intermediate_dim, num_heads=num_heads, **kwargs
        )
        self.content_scale = content_scale
        if isinstance(query_logits, dict):
            # Built in `build` below, so its variables' paths nest here.
            query_logits = {
                k: v for k, v in query_logits.items() if k != "build_config"
            }
            query_logits = keras.layers.deserialize(query_logits)
        self.query_logits = query_logits

    def __setattr__(self, name, value):
        # The hook for the attention layer: the parent's `build` assigns the
        # `keras.layers.MultiHeadAttention` it made here, unbuilt, and then
        # builds what the attribute holds.
        if (
            name == keras_hub_internals.ENCODER_ATTENTION_ATTRIBUTE
            and type(value) is keras.layers.MultiHeadAttention
        ):
            value = self.make_attention_layer(value)
        super().__setattr__(name, value)

    def make_attention_layer(self, attention):
        """The `BiasedMultiHeadAttention` standing for `attention`.

        Args:
            attention: the unbuilt `keras.layers.MultiHeadAttention` that
                keras-hub's `TransformerEncoder.build` made.

        Returns:
            An unbuilt `BiasedMultiHeadAttention` with `attention`'s every
            argument (its config, so its name and variables are the same)
            and this layer's `content_scale`.
        """
        config = attention.get_config()
        config["dtype"] = attention.dtype_policy
        for key, own in (
            ("kernel_initializer", self.kernel_initializer),
            ("bias_initializer", self.bias_initializer),
        ):
            # The parent gave a clone of this layer's initializer: rebuilt
            # from its config, a random one would draw a seed more and
            # change every later layer's initial weights under a fixed
            # `keras.utils.set_random_seed`. The attention clones it again
            # for each projection, so this layer's own instance initializes
            # them as the clone does.
            if config[key] == keras.initializers.serialize(own):
                config[key] = own
        return BiasedMultiHeadAttention(
            content_scale=self.content_scale, **config
        )

    def build(self, inputs_shape):
        hidden_dim = inputs_shape[-1]
        if hidden_dim % self.num_heads:
            raise ValueError(
                f"`hidden_dim` ({hidden_dim}) must be divisible by "
                f"`num_heads` ({self.num_heads})."
            )
        super().build(inputs_shape)
        if not isinstance(self.attention_layer, BiasedMultiHeadAttention):
            raise TypeError(
                "keras-hub's TransformerEncoder.build made a "
                f"{type(self.attention_layer).__name__} attention layer, "
                "not the keras.layers.MultiHeadAttention that "
                "BiasedTransformerEncoder replaces with its biased one."
            )
        if self.query_logits is not None and not self.query_logits.built:
            key_dim = hidden_dim // self.num_heads
            head_shape = tuple(inputs_shape[:-1]) + (self.num_heads, key_dim)
            self.query_logits.build(head_shape, head_shape)

    def call(
        self,
        inputs,
        padding_mask=None,
        attention_bias=None,
        query_key_offsets=None,
        rotary_tables=None,
        training=None,
        return_attention_scores=False,
    ):
        layers = keras_hub_internals.transformer_encoder_sublayers(self)
        x = inputs
        residual = x
        if self.normalize_first:
            x = layers.self_attention_layer_norm(x)
        outputs = layers.self_attention_layer(
            query=x,
            value=x,
            attention_mask=padding_mask,
            attention_bias=attention_bias,
            query_key_offsets=query_key_offsets,
            rotary_tables=rotary_tables,
            query_logits=self.query_logits,
            return_attention_scores=return_attention_scores,
            training=training,
        )
        if return_attention_scores:
            x, attention_scores = outputs
        else:
            x = outputs
        x = layers.self_attention_dropout(x, training=training)
        x = x + residual
        if not self.normalize_first:
            x = layers.self_attention_layer_norm(x)

        residual = x
        if self.normalize_first:
            x = layers.feedforward_layer_norm(x)
        x = layers.feedforward_intermediate_dense(x)
        x = layers.feedforward_output_dense(x)
        x = layers.feedforward_dropout(x, training=training)
        x = x + residual
        if not self.normalize_first:
            x = layers.feedforward_layer_norm(x)
        if return_attention_scores:
            return x, attention_scores
        return x

    @property
    def attention_layer(self):
        """The `BiasedMultiHeadAttention` of this layer (after `build`)."""
        return keras_hub_internals.transformer_encoder_sublayers(
            self
        ).self_attention_layer

    def attention_logits(
        self,
        inputs,
        attention_bias=None,
        query_key_offsets=None,
        rotary_tables=None,
    ):
        """float32 self-attention logits `(batch, heads, n, n)`, unmasked.

        Args:
            inputs: the layer's input `(batch, n, hidden)`.
            attention_bias, query_key_offsets, rotary_tables: as in `call`.
        """
        x = inputs
        if self.normalize_first:
            layers = keras_hub_internals.transformer_encoder_sublayers(self)
            x = layers.self_attention_layer_norm(x)
        return self.attention_layer.attention_logits(
            x,
            x,
            attention_bias,
            query_key_offsets,
            rotary_tables,
            self.query_logits,
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "content_scale": self.content_scale,
                "query_logits": (
                    keras.layers.serialize(self.query_logits)
                    if self.query_logits is not None
                    else None
                ),
            }
        )
        return config
