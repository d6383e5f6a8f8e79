"""KERPLE, logarithmic kernel: `beta[h,i,j] = -r1_h log(1 + r2_h |i - j|)`."""

import keras
from keras import ops

from tupe_tf.layers.position_bias_layer import PositionBiasLayer
from tupe_tf.layers.positive_parameters import AtLeast
from tupe_tf.layers.positive_parameters import clamped_uniform_initializer
from tupe_tf.layers.positive_parameters import log1p_of_nonnegative

# The KERPLE code's floor of `r1` and `r2` (its `eps`).
MIN_PARAMETER = 0.01


@keras.saving.register_keras_serializable(package="tupe_tf")
class KerplePositionBias(PositionBiasLayer):
    """KERPLE's logarithmic kernel (Chi et al., 2022), symmetric, all layers.

    `beta[h,i,j] = -r1_h * log(1 + r2_h * |i - j|)` with `r1_h, r2_h` learned
    per head, as the KERPLE code runs them: the weights are the parameters,
    clamped to at least 0.01 after every optimizer update (and where they
    are read, so an assigned value below it acts as 0.01); initial `r1_h`
    from `U(0, 2)`, `r2_h` from `U(0, 1)`, clamped likewise. The bias is 0
    on the diagonal and decreases with the distance. `2H` weights, shared
    by all layers.

    Args:
        num_heads: int >= 1. Number of attention heads.
        max_sequence_length: int. The longest sequence supported.
        seed: int or None. Seed of the initial values (`r2` takes
            `seed + 1`); None draws one from Keras' global seed.
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

    def __init__(self, num_heads, max_sequence_length, seed=None, **kwargs):
        super().__init__(max_sequence_length=max_sequence_length, **kwargs)
        if not (isinstance(num_heads, int) and num_heads >= 1):
            raise ValueError(
                "`num_heads` must be an integer >= 1. Received: "
                f"num_heads={num_heads!r}"
            )
        self.num_heads = num_heads
        self.seed = seed

    def build(self, input_shape=None):
        self.scales = self.add_weight(
            name="scales",
            shape=(self.num_heads,),
            initializer=clamped_uniform_initializer(
                2.0, MIN_PARAMETER, seed=self.seed
            ),
            constraint=AtLeast(MIN_PARAMETER),
        )
        self.rates = self.add_weight(
            name="rates",
            shape=(self.num_heads,),
            initializer=clamped_uniform_initializer(
                1.0,
                MIN_PARAMETER,
                seed=None if self.seed is None else self.seed + 1,
            ),
            constraint=AtLeast(MIN_PARAMETER),
        )
        self.built = True

    def kernel_parameters(self):
        """`(r1, r2)`, each `(num_heads,)` float32, at least 0.01."""
        return tuple(
            ops.maximum(weight, MIN_PARAMETER)
            for weight in (self.scales, self.rates)
        )

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
        config.update({"num_heads": self.num_heads, "seed": self.seed})
        return config
