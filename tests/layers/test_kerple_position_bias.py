import keras
import numpy as np
import pytest
from absl.testing import parameterized

from tests import numpy_reference as ref
from tests.test_case import TestCase
from tests.test_case import assert_allclose
from tests.test_case import assert_array_equal
from tests.test_case import randomize
from tests.test_case import to_numpy
from tupe_tf.layers import KerplePositionBias


def numpy_bias(layer, n):
    r1 = ref.softplus_positive(to_numpy(layer.raw_scales).astype("float64"))
    r2 = ref.softplus_positive(to_numpy(layer.raw_rates).astype("float64"))
    return ref.kerple_log_bias(r1, r2, n)


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

    @parameterized.parameters(-1e4, -200.0, 0.0, 80.0)
    def test_parameters_stay_positive_for_extreme_raw_values(self, raw):
        layer = KerplePositionBias(num_heads=2, max_sequence_length=16)
        layer.build()
        layer.raw_scales.assign([raw, -raw])
        layer.raw_rates.assign([-raw, raw])
        for parameter in layer.kernel_parameters():
            assert (keras.ops.convert_to_numpy(parameter) > 0).all()
        bias = keras.ops.convert_to_numpy(layer(np.zeros((1, 16), "int32")))
        assert np.isfinite(bias).all() and (bias <= 0).all()

    @parameterized.parameters(0, -2, 2.5, "4")
    def test_bad_num_heads_is_refused(self, num_heads):
        with pytest.raises(ValueError, match="`num_heads` must be an integer"):
            KerplePositionBias(num_heads=num_heads, max_sequence_length=8)
