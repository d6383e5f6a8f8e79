"""KERPLE, logarithmic kernel: `beta[h,i,j] = -r1_h log(1 + r2_h |i - j|)`."""

import keras
from keras import ops

from tupe_tf.layers.position_bias_layer import PositionBiasLayer
from tupe_tf.layers.positive_parameters import log1p_of_nonnegative
from tupe_tf.layers.positive_parameters import positive
from tupe_tf.layers.positive_parameters import uniform_positive_initializer


@keras.saving.register_keras_serializable(package="tupe_tf")
class KerplePositionBias(PositionBiasLayer):
    """KERPLE's logarithmic kernel (Chi et al., 2022), symmetric, all layers.

    `beta[h,i,j] = -r1_h * log(1 + r2_h * |i - j|)` with `r1_h, r2_h > 0`
    learned per head: `r = softplus(raw) + 1e-6` (see
    `positive_parameters`), so every raw value gives a valid kernel. The
    bias is 0 on the diagonal and decreases with the distance. `2H`
    weights, shared by all layers; the initial `r1_h` are drawn from
    `U(0.01, 2)` and `r2_h` from `U(0.01, 1)`.

    Args:
        num_heads: int >= 1. Number of attention heads.
        max_sequence_length: int. The longest sequence supported.
        **kwargs: other keyword arguments passed to `keras.layers.Layer`.

    Returns:
        A float32 tensor `(1, 1, num_heads, n, n)`.

    Example:
    ```python
    layer = tupe_tf.layers.KerplePositionBias(
        num_heads=4, max_sequence_length=128)
    bias = layer(np.zeros((2, 12), "int32"))  # (1, 1, 4, 12, 12)
    ```
    """

    def __init__(self, num_heads, max_sequence_length, **kwargs):
        super().__init__(max_sequence_length=max_sequence_length, **kwargs)
        if not (isinstance(num_heads, int) and num_heads >= 1):
            raise ValueError(
                "`num_heads` must be an integer >= 1. Received: "
                f"num_heads={num_heads!r}"
            )
        self.num_heads = num_heads

    def build(self, input_shape=None):
        self.raw_scales = self.add_weight(
            name="raw_scales",
            shape=(self.num_heads,),
            initializer=uniform_positive_initializer(0.01, 2.0),
        )
        self.raw_rates = self.add_weight(
            name="raw_rates",
            shape=(self.num_heads,),
            initializer=uniform_positive_initializer(0.01, 1.0),
        )
        self.built = True

    def kernel_parameters(self):
        """`(r1, r2)`, each `(num_heads,)` float32, both positive."""
        return positive(self.raw_scales), positive(self.raw_rates)

    def compute_bias(self, sequence_length):
        positions = ops.arange(sequence_length, dtype="float32")
        distance = ops.abs(positions[None, :] - positions[:, None])
        r1, r2 = self.kernel_parameters()
        bias = -r1[:, None, None] * log1p_of_nonnegative(
            r2[:, None, None] * distance
        )
        return bias[None, None]

    def get_config(self):
        config = super().get_config()
        config.update({"num_heads": self.num_heads})
        return config
