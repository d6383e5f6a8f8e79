"""FIRE: a learned function of the interpolated offset, for all layers."""

import keras
from keras import ops

from tupe_tf.layers.position_bias_layer import PositionBiasLayer
from tupe_tf.layers.positive_parameters import log1p_of_nonnegative

# The FIRE code's guard of the normaliser, `psi(max(L, n - 1)) + eps`.
NORMALISER_EPSILON = 1e-6


@keras.saving.register_keras_serializable(package="tupe_tf")
class FirePositionBias(PositionBiasLayer):
    """FIRE (Li et al., ICLR 2024), bidirectional, shared by all layers.

    `beta[h,i,j] = f(psi(|i - j|) / (psi(max(L, n - 1)) + 1e-6),
    sign(i - j))_h` with `psi(x) = log(1 + |c| x)` and `f` an MLP
    `2 -> mlp_width -> H` (ReLU). As in the FIRE code, `c` (initially 0.1)
    and the threshold `L = initial_threshold * |m|` (`m` initially 1) are
    learned through their absolute values, so an optimizer step moves them
    directly; the first input lies in `[0, 1]`. The MLP starts as PyTorch's
    `nn.Linear` (the FIRE code's), kernels and biases `U(+-1/sqrt(fan_in))`,
    so the initial bias already varies with the distance.

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
        initial_c: float > 0. Initial `c` (0.1 in the paper).
        initial_threshold: float >= 1. Initial `L` (512 in the paper).
        seed: int or None. Seed of the MLP's initial values (its four
            weights take `seed` to `seed + 3`); None draws them from Keras'
            global seed.
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
        seed=None,
        **kwargs,
    ):
        super().__init__(max_sequence_length=max_sequence_length, **kwargs)
        for name, value in (("num_heads", num_heads), ("mlp_width", mlp_width)):
            if not (isinstance(value, int) and value >= 1):
                raise ValueError(
                    f"`{name}` must be an integer >= 1. Received: "
                    f"{name}={value!r}"
                )
        if not initial_c > 0:
            raise ValueError(
                f"`initial_c` must be > 0. Received: initial_c={initial_c!r}"
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
        self.seed = seed

    def _dense_weights(self, name, fan_in, fan_out, first_seed):
        """A kernel `(fan_in, fan_out)` and bias with `nn.Linear`'s initial
        values, seeded `first_seed` and `first_seed + 1` (when not None)."""
        bound = fan_in**-0.5
        weights = []
        for offset, (part, shape) in enumerate(
            (("kernel", (fan_in, fan_out)), ("bias", (fan_out,)))
        ):
            seed = None if first_seed is None else first_seed + offset
            weights.append(
                self.add_weight(
                    name=f"{name}_{part}",
                    shape=shape,
                    initializer=keras.initializers.RandomUniform(
                        -bound, bound, seed=seed
                    ),
                )
            )
        return weights

    def build(self, input_shape=None):
        self.c = self.add_weight(
            name="c",
            shape=(),
            initializer=keras.initializers.Constant(self.initial_c),
        )
        self.threshold_multiplier = self.add_weight(
            name="threshold_multiplier",
            shape=(),
            initializer=keras.initializers.Constant(1.0),
        )
        seed = self.seed
        self.hidden_kernel, self.hidden_bias = self._dense_weights(
            "hidden", 2, self.mlp_width, seed
        )
        self.output_kernel, self.output_bias = self._dense_weights(
            "output",
            self.mlp_width,
            self.num_heads,
            None if seed is None else seed + 2,
        )
        self.built = True

    def interpolation_parameters(self):
        """`(c, L)`, float32 scalars, both non-negative."""
        threshold = self.initial_threshold * ops.abs(self.threshold_multiplier)
        return ops.abs(self.c), threshold

    def interpolated_offsets(self, sequence_length):
        """The MLP inputs of the offsets `i - j = -(n-1) .. n-1`, `(2n-1, 2)`.

        Column 0 is `psi(|i - j|) / (psi(max(L, n - 1)) + 1e-6)`, in
        `[0, 1]`; column 1 is `sign(i - j)`.
        """
        last = ops.cast(sequence_length - 1, "float32")
        offsets = ops.arange(2 * sequence_length - 1, dtype="float32") - last
        c, threshold = self.interpolation_parameters()
        normaliser = log1p_of_nonnegative(c * ops.maximum(threshold, last))
        normaliser = normaliser + NORMALISER_EPSILON
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
                "seed": self.seed,
            }
        )
        return config
