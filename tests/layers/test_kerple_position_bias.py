import keras
import numpy as np
import pytest
from absl.testing import parameterized

from tests import numpy_reference as ref
from tests.test_case import TestCase
from tests.test_case import assert_allclose
from tests.test_case import assert_array_equal
from tests.test_case import gradients
from tests.test_case import randomize
from tests.test_case import to_numpy
from tupe_tf.layers import KerplePositionBias


def kerple_parameters(layer):
    """The KERPLE code's `(r1, r2)`: the weights, clamped at 0.01."""
    return tuple(
        np.maximum(to_numpy(w).astype("float64"), 0.01)
        for w in (layer.scales, layer.rates)
    )


def numpy_bias(layer, n):
    return ref.kerple_log_bias(*kerple_parameters(layer), n)


class KerplePositionBiasTest(TestCase):
    @parameterized.parameters(1, 2, 7, 16)
    def test_matches_numpy_spec(self, n):
        layer = KerplePositionBias(num_heads=4, max_sequence_length=16)
        layer.build()
        randomize(layer, seed=n)
        bias = keras.ops.convert_to_numpy(layer(np.zeros((2, n), "int32")))
        assert bias.shape == (1, 1, 4, n, n) and bias.dtype == np.float32
        assert_allclose(bias[0, 0], numpy_bias(layer, n), rtol=1e-5, atol=1e-6)
        # Symmetric, 0 on the diagonal, decreasing with the distance.
        assert_allclose(bias, np.swapaxes(bias, -1, -2), atol=1e-6)
        assert_array_equal(np.diagonal(bias, axis1=-2, axis2=-1), 0)
        assert (np.diff(bias[0, 0, :, 0, :], axis=-1) < 0).all()

    def test_padding_invariance(self):
        """The bias of n tokens is the top-left block of any longer one, and
        the token ids (pads or not) do not matter."""
        layer = KerplePositionBias(num_heads=4, max_sequence_length=16)
        layer.build()
        randomize(layer)
        ids = np.random.default_rng(0).integers(1, 50, (2, 9)).astype("int32")
        short = keras.ops.convert_to_numpy(layer(ids))
        padded = keras.ops.convert_to_numpy(
            layer(np.pad(ids, ((0, 0), (0, 5))))
        )
        assert_allclose(padded[..., :9, :9], short, atol=1e-6)
        assert_array_equal(short, layer(np.zeros_like(ids)))

    def test_initial_parameters(self):
        layer = KerplePositionBias(num_heads=64, max_sequence_length=8)
        layer.build()
        r1, r2 = (
            keras.ops.convert_to_numpy(p) for p in layer.kernel_parameters()
        )
        assert (r1 > 0.009).all() and (r1 < 2.001).all() and r1.std() > 0.1
        assert (r2 > 0.009).all() and (r2 < 1.001).all() and r2.std() > 0.05

    def test_parameters_are_the_weights_clamped_at_the_kerple_floor(self):
        layer = KerplePositionBias(num_heads=2, max_sequence_length=16)
        layer.build()
        layer.scales.assign([0.5, -1e4])
        layer.rates.assign([1e-4, 80.0])
        r1, r2 = (to_numpy(p) for p in layer.kernel_parameters())
        assert_allclose(r1, [0.5, 0.01], rtol=1e-6)
        assert_allclose(r2, [0.01, 80.0], rtol=1e-6)
        bias = keras.ops.convert_to_numpy(layer(np.zeros((1, 16), "int32")))
        assert np.isfinite(bias).all() and (bias <= 0).all()

    def test_an_optimizer_step_moves_the_parameters_themselves(self):
        """As in the KERPLE code, a gradient step changes `r1` and `r2` by
        the learning rate times their own gradient (no softplus slowing
        small values), and the update is clamped back to 0.01."""
        n, learning_rate = 6, 1e-3
        layer = KerplePositionBias(num_heads=2, max_sequence_length=16)
        layer.build()
        layer.scales.assign([0.05, 1.5])
        layer.rates.assign([0.3, 0.02])
        r1, r2 = kerple_parameters(layer)
        ids = np.zeros((1, n), "int32")
        variables = [layer.scales, layer.rates]
        grads = gradients(layer, keras.ops.sum, ids, variables)
        # d/dr of sum_ij -r1 log(1 + r2 |i - j|), in NumPy.
        distance = np.abs(np.subtract.outer(np.arange(n), np.arange(n)))
        grad_r1 = -np.log1p(r2[:, None, None] * distance).sum(axis=(1, 2))
        grad_r2 = -(r1[:, None, None] * distance) / (
            1 + r2[:, None, None] * distance
        )
        grad_r2 = grad_r2.sum(axis=(1, 2))
        assert_allclose(grads[0], grad_r1, rtol=1e-5)
        assert_allclose(grads[1], grad_r2, rtol=1e-5)
        optimizer = keras.optimizers.SGD(learning_rate=learning_rate)
        optimizer.apply(
            [keras.ops.convert_to_tensor(g) for g in grads], variables
        )
        assert_allclose(layer.scales, r1 - learning_rate * grad_r1, rtol=1e-5)
        assert_allclose(layer.rates, r2 - learning_rate * grad_r2, rtol=1e-5)
        # A step below the floor is clamped to it (the code's clamp).
        layer.scales.assign([0.05, 1.5])
        layer.rates.assign([0.3, 0.02])
        optimizer = keras.optimizers.SGD(learning_rate=1.0)
        optimizer.apply([keras.ops.ones((2,)), keras.ops.ones((2,))], variables)
        assert_allclose(layer.scales, [0.01, 0.5], rtol=1e-5)
        assert_allclose(layer.rates, [0.01, 0.01], rtol=1e-5)

    @parameterized.parameters(0, -2, 2.5, "4")
    def test_bad_num_heads_is_refused(self, num_heads):
        with pytest.raises(ValueError, match="`num_heads` must be an integer"):
            KerplePositionBias(num_heads=num_heads, max_sequence_length=8)
