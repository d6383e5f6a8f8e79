"""BERT-A^d's projected positions, added to every layer's query and key."""

import math

import keras
from keras import ops

from tupe_tf.layers.initializers import with_seed_offset
from tupe_tf.layers.position_bias_layer import PositionBiasLayer


@keras.saving.register_keras_serializable(package="tupe_tf")
class UntiedPositionOffsets(PositionBiasLayer):
    """`(LN_p(p) U^Q + b^Q, LN_p(p) U^K + b^K)`, shared by all layers.

    The ablation BERT-A^d of the TUPE paper adds these to the projected
    query and key of every layer, so its logits are
    `1/sqrt(4d) * (x W^Q + p U^Q)(x W^K + p U^K)^T`. The table `p`, its own
    LayerNorm `LN_p` and the `D x D` projections (with bias) are those of
    `UntiedPositionBias`, which extends this layer.

    Args:
        num_heads: int. Number of attention heads.
        hidden_dim: int. Model width `D`.
        max_sequence_length: int. The longest sequence supported.
        scale: float or None. Scale of the position-position term in
            `content_free_bias`; defaults to `1/sqrt(4 * head_dim)`.
        layer_norm_epsilon: float. Epsilon of `LN_p`; 1e-5 as in the TUPE
            authors' code.
        initializer: initializer of the table and projections (each weight
            draws its own values from it: `with_seed_offset`).
        **kwargs: other keyword arguments passed to `keras.layers.Layer`.

    Returns:
        A float32 tensor `(2, n, num_heads, head_dim)`: the query offsets,
        then the key offsets (`BiasedMultiHeadAttention`'s
        `query_key_offsets`).

    Example:
    ```python
    layer = tupe_tf.layers.UntiedPositionOffsets(
        num_heads=4, hidden_dim=64, max_sequence_length=128)
    offsets = layer(np.zeros((2, 16), "int32"))  # (2, 16, 4, 16)
    ```
    """

    # Rows of the table before token 0's (UntiedPositionBias: theta rows).
    _row_offset = 0
    # The weight whose rows are positions, for `models.context_extension`:
    # attribute -> (position axis, layout).
    length_tables = {"position_embeddings": (0, "absolute")}

    def __init__(
        self,
        num_heads,
        hidden_dim,
        max_sequence_length,
        scale=None,
        layer_norm_epsilon=1e-5,
        initializer=None,
        **kwargs,
    ):
        super().__init__(max_sequence_length=max_sequence_length, **kwargs)
        if hidden_dim % num_heads:
            raise ValueError(
                f"`hidden_dim` ({hidden_dim}) must be divisible by "
                f"`num_heads` ({num_heads})."
            )
        self.num_heads = num_heads
        self.hidden_dim = hidden_dim
        self.head_dim = hidden_dim // num_heads
        self.scale = scale
        self.layer_norm_epsilon = layer_norm_epsilon
        self.initializer = keras.initializers.get(
            initializer or keras.initializers.TruncatedNormal(stddev=0.02)
        )
        self._scale = scale if scale is not None else self._default_scale()
        self.position_layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon,
            dtype="float32",
            name="position_layer_norm",
        )
        # The table takes the seed as it is, the projections offsets 1, 2
        # (3: `UntiedPositionBias`' relative table): independent values.
        self.query_projection = keras.layers.Dense(
            hidden_dim,
            kernel_initializer=with_seed_offset(self.initializer, 1),
            dtype="float32",
            name="position_query_projection",
        )
        self.key_projection = keras.layers.Dense(
            hidden_dim,
            kernel_initializer=with_seed_offset(self.initializer, 2),
            dtype="float32",
            name="position_key_projection",
        )

    def _default_scale(self):
        return 1.0 / math.sqrt(4 * self.head_dim)

    def build(self, input_shape=None):
        self.position_embeddings = self.add_weight(
            name="position_embeddings",
            shape=(
                self.max_sequence_length + self._row_offset,
                self.hidden_dim,
            ),
            initializer=self.initializer,
        )
        self.position_layer_norm.build((None, self.hidden_dim))
        self.query_projection.build((None, self.hidden_dim))
        self.key_projection.build((None, self.hidden_dim))
        self.built = True

    def project(self, num_rows):
        """`(LN_p(p) U^Q + b^Q, LN_p(p) U^K + b^K)` of the first table rows,
        each `(num_rows, heads, head_dim)`."""
        positions = self.position_layer_norm(
            self.position_embeddings[:num_rows]
        )
        shape = (num_rows, self.num_heads, self.head_dim)
        query = ops.reshape(self.query_projection(positions), shape)
        key = ops.reshape(self.key_projection(positions), shape)
        return query, key

    def compute_bias(self, sequence_length):
        return ops.stack(self.project(sequence_length))

    def bias_shape(self, sequence_length):
        return (2, sequence_length, self.num_heads, self.head_dim)

    def content_free_bias(self, sequence_length):
        """The position-position term `scale (p U^Q)(p U^K)^T`,
        `(1, 1, heads, n, n)`."""
        query, key = self.project(sequence_length)
        bias = ops.einsum("ihd,jhd->hij", query, key) * self._scale
        return bias[None, None]

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "hidden_dim": self.hidden_dim,
                "scale": self.scale,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "initializer": keras.initializers.serialize(self.initializer),
            }
        )
        return config
