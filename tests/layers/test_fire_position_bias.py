import keras
import numpy as np
import pytest
from absl.testing import parameterized

from tests import numpy_reference as ref
from tests.test_case import TestCase
from tests.test_case import allclose
from tests.test_case import assert_allclose
from tests.test_case import assert_array_equal
from tests.test_case import randomize
from tests.test_case import to_numpy
from tupe_tf.layers import FirePositionBias


def make_layer(**kwargs):
    layer = FirePositionBias(
        **{"num_heads": 3, "max_sequence_length": 16, **kwargs}
    )
    layer.build()
    return layer


def numpy_bias(layer, n):
    w = {v.name: to_numpy(v).astype("float64") for v in layer.weights}
    # The FIRE code's parameters: |c| and |m| times the initial threshold.
    c = abs(w["c"])
    threshold = layer.initial_threshold * abs(w["threshold_multiplier"])
    return ref.fire_bias(
        c,
        threshold,
        w["hidden_kernel"],
        w["hidden_bias"],
        w["output_kernel"],
        w["output_bias"],
        n,
    )


class FirePositionBiasTest(TestCase):
    @parameterized.parameters(
        (1, 512.0), (2, 4.0), (5, 4.0), (9, 4.0), (16, 4.0), (16, 64.0)
    )
    def test_matches_numpy_spec(self, n, initial_threshold):
        layer = make_layer(initial_threshold=initial_threshold, mlp_width=8)
        randomize(layer, seed=n)
        bias = keras.ops.convert_to_numpy(layer(np.zeros((2, n), "int32")))
        assert bias.shape == (1, 1, 3, n, n) and bias.dtype == np.float32
        assert_allclose(bias[0, 0], numpy_bias(layer, n), rtol=1e-5, atol=1e-5)

    def test_paper_initial_values_and_mlp_inputs_in_range(self):
        layer = make_layer()
        c, threshold = layer.interpolation_parameters()
        assert_allclose([c, threshold], [0.1, 512.0], rtol=1e-5)
        features = keras.ops.convert_to_numpy(layer.interpolated_offsets(9))
        assert features.shape == (17, 2)
        assert_array_equal(features[:, 1], np.sign(np.arange(-8, 9)))
        # psi(8) / psi(512) at the ends, 0 in the middle, symmetric.
        expected = np.log1p(0.1 * np.abs(np.arange(-8, 9))) / np.log1p(51.2)
        assert_allclose(features[:, 0], expected, rtol=1e-5)

    def test_padding_below_and_above_the_threshold(self):
        """Pads never matter while n - 1 <= L: the bias of n tokens is the
        top-left block of a longer one. Above L the normaliser is n - 1, so
        every length maps onto [0, 1] and extra padding changes the bias."""
        ids = np.random.default_rng(0).integers(1, 50, (2, 9)).astype("int32")
        padded_ids = np.pad(ids, ((0, 0), (0, 5)))
        for initial_threshold, invariant in ((16.0, True), (2.0, False)):
            layer = make_layer(initial_threshold=initial_threshold)
            randomize(layer)
            layer.threshold_multiplier.assign(1.0)  # L = initial_threshold
            short = keras.ops.convert_to_numpy(layer(ids))
            assert_array_equal(short, layer(np.zeros_like(ids)))
            padded = keras.ops.convert_to_numpy(layer(padded_ids))
            same = allclose(padded[..., :9, :9], short, atol=1e-6)
            assert same == invariant, initial_threshold

    @parameterized.parameters(-1e4, -200.0, 0.0, 80.0, 1e4)
    def test_parameters_are_absolute_values_of_extreme_weights(self, value):
        layer = make_layer(initial_threshold=4.0)
        randomize(layer)
        layer.c.assign(value)
        layer.threshold_multiplier.assign(-value)
        c, threshold = layer.interpolation_parameters()
        assert_allclose([c, threshold], [abs(value), 4 * abs(value)])
        for n in (1, 2, 16):
            features = keras.ops.convert_to_numpy(layer.interpolated_offsets(n))
            assert np.isfinite(features).all()
            # In [0, 1] up to float32 rounding.
            assert (features[:, 0] >= 0).all()
            assert (features[:, 0] <= 1 + 1e-6).all()
            bias = keras.ops.convert_to_numpy(layer(np.zeros((1, n), "int32")))
            assert np.isfinite(bias).all()

    def test_initial_mlp_is_the_fire_codes_nn_linear(self):
        """Kernels and biases start `U(+-1/sqrt(fan_in))` (PyTorch's
        `nn.Linear`, the FIRE code's MLP), so the initial bias varies with
        the distance by a fraction of a nat, not by BERT-init's ~1e-4."""
        layer = make_layer(num_heads=16, mlp_width=256, max_sequence_length=64)
        for name, fan_in in (("hidden", 2), ("output", 256)):
            bound = fan_in**-0.5
            for part in ("kernel", "bias"):
                w = to_numpy(getattr(layer, f"{name}_{part}"))
                assert np.abs(w).max() <= bound, (name, part)
                # U(-b, b) has standard deviation b / sqrt(3).
                assert abs(w.std() * np.sqrt(3) / bound - 1) < 0.2, (name, part)
        bias = to_numpy(layer(np.zeros((1, 64), "int32")))[0, 0]
        spread = bias.max(axis=(1, 2)) - bias.min(axis=(1, 2))
        assert np.median(spread) > 0.05

    @parameterized.parameters(
        ({"num_heads": 0}, "`num_heads` must be an integer >= 1"),
        ({"mlp_width": 0}, "`mlp_width` must be an integer >= 1"),
        ({"mlp_width": 2.5}, "`mlp_width` must be an integer >= 1"),
        ({"initial_c": 0.0}, "`initial_c` must be > 0"),
        ({"initial_c": -1.0}, "`initial_c` must be > 0"),
        ({"initial_threshold": 0.5}, "`initial_threshold` must be >= 1"),
    )
    def test_bad_constructor_values_are_refused(self, kwargs, match):
        with pytest.raises(ValueError, match=match):
            FirePositionBias(
                **{"num_heads": 2, "max_sequence_length": 8, **kwargs}
            )

    def test_shared_by_heads_through_one_mlp_and_folds(self):
        layer = make_layer(initial_threshold=2.0)
        randomize(layer, seed=7)
        ids = np.zeros((1, 12), "int32")
        expected = keras.ops.convert_to_numpy(layer(ids))
        layer.fold([12])
        layer.output_bias.assign(layer.output_bias + 1.0)
        assert_array_equal(layer(ids), expected)
        layer.unfold()
        assert_allclose(layer(ids), expected + 1.0, atol=1e-5)
