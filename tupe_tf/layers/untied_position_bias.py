"""TUPE's untied absolute position correlation with the [CLS] reset."""

import math

import keras
from keras import ops

from tupe_tf.layers.position_bias_layer import PositionBiasLayer
from tupe_tf.layers.relative_position_bias import RelativePositionBias


def reset_cls(bias, theta_cls_row, theta_cls_column):
    """Untie `[CLS]` (TUPE Eq. 9) on a `(heads, n, n)` bias.

    Row 0 (the `[CLS]` query, `[CLS]`->`[CLS]` included) becomes `theta1_h`;
    column 0 of every other row becomes `theta2_h`. Written with `where`, not
    slice assignment, so it traces under XLA.

    Args:
        bias: float tensor `(heads, n, n)`.
        theta_cls_row: float tensor `(heads,)`, theta1.
        theta_cls_column: float tensor `(heads,)`, theta2.
    """
    length = ops.shape(bias)[-1]
    index = ops.arange(length, dtype="int32")
    is_first_row = ops.reshape(ops.equal(index, 0), (1, -1, 1))
    is_first_column = ops.logical_and(
        ops.reshape(ops.equal(index, 0), (1, 1, -1)),
        ops.reshape(ops.greater(index, 0), (1, -1, 1)),
    )
    bias = ops.where(is_first_column, theta_cls_column[:, None, None], bias)
    return ops.where(is_first_row, theta_cls_row[:, None, None], bias)


@keras.saving.register_keras_serializable(package="tupe_tf")
class UntiedPositionBias(PositionBiasLayer):
    """TUPE's position-to-position correlation, shared by all layers.

    `v[h,i,j] = scale * (LN_p(p_i) U^Q + b^Q)_h . (LN_p(p_j) U^K + b^K)_h`
    with a learned table `p`, its own LayerNorm and its own `D x D`
    projections (with bias). `scale` defaults to `1/sqrt(2d)`.

    With `untie_cls=True` the table has `max_sequence_length + 1` rows, as in
    the authors' reference code: token `i` uses row `i + 1`, `theta1` (the
    `[CLS]` row) comes from row 0 and `theta2` (everyone -> `[CLS]`) from row
    1, each as the correlation of that row with itself. With
    `untie_cls=False` (ablation TUPE-A^{tie-cls}) the table has
    `max_sequence_length` rows and token `i` uses row `i`.

    With `relative_buckets` set (TUPE-R), T5 relative buckets are added and,
    as in the paper's Eq. 11, the reset is applied to the sum `v + b`: each
    head gets one learned scalar for the `[CLS]` row and one for the
    `[CLS]` column.

    With `output_projections=True` the layer instead returns the projected
    positions `(LN_p(p) U^Q + b^Q, LN_p(p) U^K + b^K)`, each
    `(n, heads, head_dim)`, for the BERT-A^d ablation, which adds them to the
    per-layer query and key.

    Args:
        num_heads: int. Number of attention heads.
        hidden_dim: int. Model width `D`.
        max_sequence_length: int. The longest sequence supported.
        untie_cls: bool. Apply the `[CLS]` reset.
        relative_buckets: int or None. T5 buckets for TUPE-R.
        relative_max_distance: int. T5 maximum distance.
        scale: float or None. Defaults to `1/sqrt(2 * head_dim)`.
        output_projections: bool. Return projections instead of the bias.
        layer_norm_epsilon: float. Epsilon of `LN_p`.
        initializer: initializer of the table and projections.
        **kwargs: other keyword arguments passed to `keras.layers.Layer`.

    Call arguments:
        inputs: any tensor of shape `(batch, n, ...)`; only `n` is used.

    Returns:
        A float32 tensor `(1, num_heads, n, n)`, or the two projections.

    Example:
    ```python
    layer = tupe_tf.layers.UntiedPositionBias(
        num_heads=4, hidden_dim=64, max_sequence_length=128)
    bias = layer(np.zeros((2, 16), "int32"))  # (1, 4, 16, 16)
    ```
    """

    def __init__(
        self,
        num_heads,
        hidden_dim,
        max_sequence_length,
        untie_cls=True,
        relative_buckets=None,
        relative_max_distance=128,
        scale=None,
        output_projections=False,
        layer_norm_epsilon=1e-12,
        initializer=None,
        **kwargs,
    ):
        super().__init__(max_sequence_length=max_sequence_length, **kwargs)
        if hidden_dim % num_heads:
            raise ValueError(
                f"`hidden_dim` ({hidden_dim}) must be divisible by "
                f"`num_heads` ({num_heads})."
            )
        if output_projections and (untie_cls or relative_buckets):
            raise ValueError(
                "`output_projections=True` (BERT-A^d) takes neither "
                "`untie_cls` nor `relative_buckets`."
            )
        self.num_heads = num_heads
        self.hidden_dim = hidden_dim
        self.head_dim = hidden_dim // num_heads
        self.untie_cls = untie_cls
        self.relative_buckets = relative_buckets
        self.relative_max_distance = relative_max_distance
        self.scale = scale
        self.output_projections = output_projections
        self.layer_norm_epsilon = layer_norm_epsilon
        self.initializer = keras.initializers.get(
            initializer or keras.initializers.TruncatedNormal(stddev=0.02)
        )
        self._scale = (
            scale if scale is not None else 1.0 / math.sqrt(2 * self.head_dim)
        )
        self._row_offset = 1 if untie_cls else 0

        self.position_layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon,
            dtype="float32",
            name="position_layer_norm",
        )
        self.query_projection = keras.layers.Dense(
            hidden_dim,
            kernel_initializer=self.initializer,
            dtype="float32",
            name="position_query_projection",
        )
        self.key_projection = keras.layers.Dense(
            hidden_dim,
            kernel_initializer=self.initializer,
            dtype="float32",
            name="position_key_projection",
        )
        self.relative_position_bias = None
        if relative_buckets:
            self.relative_position_bias = RelativePositionBias(
                num_heads=num_heads,
                max_sequence_length=max_sequence_length,
                num_buckets=relative_buckets,
                max_distance=relative_max_distance,
                initializer=self.initializer,
                name="relative_position_bias",
            )

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
        if self.relative_position_bias is not None:
            self.relative_position_bias.build()
        self.built = True

    def _project(self, num_rows):
        positions = self.position_layer_norm(
            self.position_embeddings[:num_rows]
        )
        shape = (num_rows, self.num_heads, self.head_dim)
        query = ops.reshape(self.query_projection(positions), shape)
        key = ops.reshape(self.key_projection(positions), shape)
        return query, key

    def compute_bias(self, sequence_length):
        offset = self._row_offset
        query, key = self._project(sequence_length + offset)
        if self.output_projections:
            return query, key
        token_query, token_key = query[offset:], key[offset:]
        bias = ops.einsum("ihd,jhd->hij", token_query, token_key) * self._scale
        if self.relative_position_bias is not None:
            bias = (
                bias
                + self.relative_position_bias.compute_bias(sequence_length)[0]
            )
        if self.untie_cls:
            # theta_k: row k of the table correlated with itself.
            theta = ops.sum(query[:2] * key[:2], axis=-1) * self._scale
            bias = reset_cls(bias, theta[0], theta[1])
        return ops.expand_dims(bias, 0)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "hidden_dim": self.hidden_dim,
                "untie_cls": self.untie_cls,
                "relative_buckets": self.relative_buckets,
                "relative_max_distance": self.relative_max_distance,
                "scale": self.scale,
                "output_projections": self.output_projections,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "initializer": keras.initializers.serialize(self.initializer),
            }
        )
        return config
