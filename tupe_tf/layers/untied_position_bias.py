"""TUPE's untied absolute position correlation with the [CLS] reset."""

import math

import keras
from keras import ops

from tupe_tf.layers.initializers import with_seed_offset
from tupe_tf.layers.position_bias_layer import PositionBiasLayer
from tupe_tf.layers.relative_position_bias import RelativePositionBias
from tupe_tf.layers.untied_position_offsets import UntiedPositionOffsets
from tupe_tf.utils.backbone_options import CLS_RELATIVES


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
class UntiedPositionBias(UntiedPositionOffsets):
    """TUPE's position-to-position correlation, shared by all layers.

    `v[h,i,j] = scale * (LN_p(p_i) U^Q + b^Q)_h . (LN_p(p_j) U^K + b^K)_h`
    with a learned table `p`, its own LayerNorm and its own `D x D`
    projections (with bias), all those of `UntiedPositionOffsets`, which
    this layer extends: it returns their correlation instead of the
    projections. `scale` defaults to `1/sqrt(2d)`.

    With `untie_cls=True` the table has `max_sequence_length + 1` rows, as in
    the authors' reference code: token `i` uses row `i + 1`, `theta1` (the
    `[CLS]` row) comes from row 0 and `theta2` (everyone -> `[CLS]`) from row
    1, each as the correlation of that row with itself. With
    `untie_cls=False` (ablation TUPE-A^{tie-cls}) the table has
    `max_sequence_length` rows and token `i` uses row `i`.

    With `relative_buckets` set (TUPE-R), T5 relative buckets are added and,
    as in the paper's Eq. 11, the reset is applied to the sum `v + b`: each
    head gets one learned scalar for the `[CLS]` row and one for the
    `[CLS]` column. `cls_relative="reference"` instead follows the authors'
    code: the absolute part alone is reset, then relative buckets are added
    in which `[CLS]`'s row and column have their own entries (see
    `RelativePositionBias(cls_buckets=True)`), so their weights map one to
    one.

    Args:
        num_heads: int. Number of attention heads.
        hidden_dim: int. Model width `D`.
        max_sequence_length: int. The longest sequence supported.
        untie_cls: bool. Apply the `[CLS]` reset.
        relative_buckets: int or None. T5 buckets for TUPE-R.
        relative_max_distance: int. T5 maximum distance.
        cls_relative: str. `reset` (Eq. 11) or `reference` (the authors'
            layout; needs `untie_cls` and `relative_buckets`).
        scale: float or None. Defaults to `1/sqrt(2 * head_dim)`.
        layer_norm_epsilon: float. Epsilon of `LN_p` (1e-5, the reference
            code's).
        initializer: initializer of the table, projections and relative
            table (each weight draws its own values: `with_seed_offset`).
        **kwargs: other keyword arguments passed to `keras.layers.Layer`.

    Returns:
        A float32 tensor `(1, 1, num_heads, n, n)`.

    Example:
    ```python
    layer = tupe_tf.layers.UntiedPositionBias(
        num_heads=4, hidden_dim=64, max_sequence_length=128)
    bias = layer(np.zeros((2, 16), "int32"))  # (1, 1, 4, 16, 16)
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
        cls_relative="reset",
        scale=None,
        layer_norm_epsilon=1e-5,
        initializer=None,
        **kwargs,
    ):
        super().__init__(
            num_heads=num_heads,
            hidden_dim=hidden_dim,
            max_sequence_length=max_sequence_length,
            scale=scale,
            layer_norm_epsilon=layer_norm_epsilon,
            initializer=initializer,
            **kwargs,
        )
        if cls_relative not in CLS_RELATIVES:
            raise ValueError(
                f"`cls_relative` must be one of {CLS_RELATIVES}. Received: "
                f"cls_relative={cls_relative!r}"
            )
        if cls_relative == "reference" and not (untie_cls and relative_buckets):
            raise ValueError(
                '`cls_relative="reference"` is the [CLS] layout of TUPE-R: it '
                "needs `untie_cls=True` and relative buckets (tupe-r). "
                f"Received: untie_cls={untie_cls}, "
                f"relative_buckets={relative_buckets}"
            )
        self.untie_cls = untie_cls
        self.cls_relative = cls_relative
        self.relative_buckets = relative_buckets
        self.relative_max_distance = relative_max_distance
        self.relative_position_bias = None
        if relative_buckets:
            self.relative_position_bias = RelativePositionBias(
                num_heads=num_heads,
                max_sequence_length=max_sequence_length,
                num_buckets=relative_buckets,
                max_distance=relative_max_distance,
                cls_buckets=cls_relative == "reference",
                initializer=with_seed_offset(self.initializer, 3),
                name="relative_position_bias",
            )

    @property
    def _row_offset(self):
        return 1 if self.untie_cls else 0

    def _default_scale(self):
        return 1.0 / math.sqrt(2 * self.head_dim)

    def build(self, input_shape=None):
        super().build(input_shape)
        if self.relative_position_bias is not None:
            self.relative_position_bias.build()

    def compute_bias(self, sequence_length):
        offset = self._row_offset
        query, key = self.project(sequence_length + offset)
        token_query, token_key = query[offset:], key[offset:]
        bias = ops.einsum("ihd,jhd->hij", token_query, token_key) * self._scale
        relative = None
        if self.relative_position_bias is not None:
            relative = self.relative_position_bias.compute_bias(sequence_length)
            relative = relative[0, 0]
        if relative is not None and self.cls_relative == "reset":
            bias = bias + relative  # Eq. 11: the reset covers the sum.
        if self.untie_cls:
            # theta_k: row k of the table correlated with itself.
            theta = ops.sum(query[:2] * key[:2], axis=-1) * self._scale
            bias = reset_cls(bias, theta[0], theta[1])
        if relative is not None and self.cls_relative == "reference":
            bias = bias + relative  # [CLS] has its own buckets here.
        return bias[None, None]

    # The correlation, not the projections: one bias for every layer.
    bias_shape = PositionBiasLayer.bias_shape

    def content_free_bias(self, sequence_length):
        return self.compute_bias(sequence_length)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "untie_cls": self.untie_cls,
                "relative_buckets": self.relative_buckets,
                "relative_max_distance": self.relative_max_distance,
                "cls_relative": self.cls_relative,
            }
        )
        return config
