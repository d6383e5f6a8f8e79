"""FIRE: a learned function of the interpolated offset, for all layers."""

import keras
from keras import ops

from tupe_tf.layers.position_bias_layer import PositionBiasLayer
from tupe_tf.layers.positive_parameters import MIN_POSITIVE
from tupe_tf.layers.positive_parameters import log1p_of_nonnegative
from tupe_tf.layers.positive_parameters import positive
from tupe_tf.layers.positive_parameters import raw_of


@keras.saving.register_keras_serializable(package="tupe_tf")
class FirePositionBias(PositionBiasLayer):
    """FIRE (Li et al., ICLR 2024), bidirectional, shared by all layers.

    `beta[h,i,j] = f(psi(|i - j|) / psi(max(L, n - 1)), sign(i - j))_h` with
    `psi(x) = log(1 + c x)` and `f` an MLP `2 -> mlp_width -> H` (ReLU).
    `c = softplus(raw_c) + 1e-6` and the threshold
    `L = initial_threshold * (softplus(raw_threshold) + 1e-6)` are learned
    and positive by construction, so the first input lies in `[0, 1]`.

    The paper normalises by the query position `i` (causal attention). Here
    the normaliser is the largest distance of the batch, `n - 1`: it does
    not depend on the query, the bias stays content-free (computed once per
    forward pass, folded at export) and every length maps onto `[0, 1]`.
    While `n - 1 <= L` the bias does not depend on `n` (nor on padding);
    above `L` it does. The MLP runs on the `2n - 1` offsets and one gather
    builds the `(H, n, n)` Toeplitz bias.

    Args:
        num_heads: int >= 1. Number of attention heads.
        max_sequence_length: int. The longest sequence supported.
        mlp_width: int >= 1. Hidden width of `f` (32 in the paper).
        initial_c: float > 1e-6. Initial `c` (0.1 in the paper).
        initial_threshold: float >= 1. Initial `L` (512 in the paper).
        initializer: initializer of the MLP kernels (biases start at 0).
        **kwargs: other keyword arguments passed to `keras.layers.Layer`.

    Returns:
        A float32 tensor `(1, 1, num_heads, n, n)`.

    Example:
    ```python
    layer = tupe_tf.layers.FirePositionBias(
        num_heads=4, max_sequence_length=128)
    bias = layer(np.zeros((2, 12), "int32"))  # (1, 1, 4, 12, 12)
    ```
    """

    def __init__(
        self,
        num_heads,
        max_sequence_length,
        mlp_width=32,
        initial_c=0.1,
        initial_threshold=512.0,
        initializer=None,
        **kwargs,
    ):
        super().__init__(max_sequence_length=max_sequence_length, **kwargs)
        for name, value in (("num_heads", num_heads), ("mlp_width", mlp_width)):
            if not (isinstance(value, int) and value >= 1):
                raise ValueError(
                    f"`{name}` must be an integer >= 1. Received: "
                    f"{name}={value!r}"
                )
        if not initial_c > MIN_POSITIVE:
            raise ValueError(
                f"`initial_c` must be > {MIN_POSITIVE}. Received: "
                f"initial_c={initial_c!r}"
            )
        if not initial_threshold >= 1:
            raise ValueError(
                "`initial_threshold` must be >= 1 (a distance). Received: "
                f"initial_threshold={initial_threshold!r}"
            )
        self.num_heads = num_heads
        self.mlp_width = mlp_width
        self.initial_c = float(initial_c)
        self.initial_threshold = float(initial_threshold)
        self.initializer = keras.initializers.get(
            initializer or keras.initializers.TruncatedNormal(stddev=0.02)
        )

    def build(self, input_shape=None):
        self.raw_c = self.add_weight(
            name="raw_c",
            shape=(),
            initializer=keras.initializers.Constant(raw_of(self.initial_c)),
        )
        self.raw_threshold = self.add_weight(
            name="raw_threshold",
            shape=(),
            initializer=keras.initializers.Constant(raw_of(1.0)),
        )
        self.hidden_kernel = self.add_weight(
            name="hidden_kernel",
            shape=(2, self.mlp_width),
            initializer=self.initializer,
        )
        self.hidden_bias = self.add_weight(
            name="hidden_bias", shape=(self.mlp_width,), initializer="zeros"
        )
        self.output_kernel = self.add_weight(
            name="output_kernel",
            shape=(self.mlp_width, self.num_heads),
            initializer=self.initializer,
        )
        self.output_bias = self.add_weight(
            name="output_bias", shape=(self.num_heads,), initializer="zeros"
        )
        self.built = True

    def interpolation_parameters(self):
        """`(c, L)`, float32 scalars, both positive."""
        threshold = self.initial_threshold * positive(self.raw_threshold)
        return positive(self.raw_c), threshold

    def interpolated_offsets(self, sequence_length):
        """The MLP inputs of the offsets `i - j = -(n-1) .. n-1`, `(2n-1, 2)`.

        Column 0 is `psi(|i - j|) / psi(max(L, n - 1))`, in `[0, 1]`;
        column 1 is `sign(i - j)`.
        """
        last = ops.cast(sequence_length - 1, "float32")
        offsets = ops.arange(2 * sequence_length - 1, dtype="float32") - last
        c, threshold = self.interpolation_parameters()
        normaliser = log1p_of_nonnegative(c * ops.maximum(threshold, last))
        distance = log1p_of_nonnegative(c * ops.abs(offsets)) / normaliser
        return ops.stack([distance, ops.sign(offsets)], axis=-1)

    def compute_bias(self, sequence_length):
        features = self.interpolated_offsets(sequence_length)
        hidden = ops.relu(features @ self.hidden_kernel + self.hidden_bias)
        values = hidden @ self.output_kernel + self.output_bias  # (2n-1, H)
        positions = ops.arange(sequence_length, dtype="int32")
        index = positions[:, None] - positions[None, :] + sequence_length - 1
        bias = ops.take(ops.transpose(values), index, axis=1)  # (H, n, n)
        return bias[None, None]

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "mlp_width": self.mlp_width,
                "initial_c": self.initial_c,
                "initial_threshold": self.initial_threshold,
                "initializer": keras.initializers.serialize(self.initializer),
            }
        )
        return config
