import keras
import keras_hub
import numpy as np
import pytest
from absl.testing import parameterized
from keras.backend import standardize_dtype

from tests import numpy_reference as ref
from tests.test_case import TestCase
from tests.test_case import allclose
from tests.test_case import assert_allclose
from tupe_tf.layers import RotaryPositionTables
from tupe_tf.layers.rotary_position_tables import rope_frequencies
from tupe_tf.layers.rotary_position_tables import rotate


class RotaryPositionTablesTest(TestCase):
    def test_rotation_matches_numpy_and_keras_hub(self):
        layer = RotaryPositionTables(head_dim=8, max_sequence_length=16)
        tables = layer(np.zeros((2, 11), "int32"))
        assert (
            tables.shape == (2, 11, 1, 8)
            and standardize_dtype(tables.dtype) == "float32"
        )
        x = np.random.default_rng(0).normal(size=(2, 11, 3, 8))
        x = x.astype("float32")
        rotated = keras.ops.convert_to_numpy(rotate(x, tables))
        assert_allclose(
            rotated, ref.rope_rotate(x.astype("float64")), atol=1e-5
        )
        assert_allclose(
            rotated,
            keras_hub.layers.RotaryEmbedding()(x),
            atol=1e-5,
        )
        assert_allclose(
            keras.ops.convert_to_numpy(rotate(x, tables, scale=0.25)),
            0.25 * rotated,
            atol=1e-6,
        )

    def test_logits_depend_only_on_the_offset(self):
        layer = RotaryPositionTables(
            head_dim=8, max_sequence_length=32, max_wavelength=500
        )
        tables = layer(np.zeros((1, 32), "int32"))
        rng = np.random.default_rng(1)
        q, k = rng.normal(size=(2, 8)).astype("float32")
        # The same content at every position: q at i, k at j.
        query = rotate(np.tile(q, (1, 32, 1, 1)), tables)[0, :, 0]
        key = rotate(np.tile(k, (1, 32, 1, 1)), tables)[0, :, 0]
        logits = keras.ops.convert_to_numpy(query @ keras.ops.transpose(key))
        for shift in (1, 5, 13):
            assert_allclose(
                logits[shift:, shift:], logits[:-shift, :-shift], atol=1e-4
            )
        assert not allclose(logits[0, 1], logits[0, 2])

    def test_wavelength_and_head_size_are_checked(self):
        for bad in (0, -10000):
            with pytest.raises(ValueError, match="rope_max_wavelength"):
                RotaryPositionTables(
                    head_dim=8, max_sequence_length=8, max_wavelength=bad
                )
        with pytest.raises(ValueError, match="even"):
            RotaryPositionTables(head_dim=7, max_sequence_length=8)

    def test_no_content_free_bias(self):
        layer = RotaryPositionTables(
            head_dim=8, max_sequence_length=8, max_wavelength=500
        )
        bias = keras.ops.convert_to_numpy(layer.content_free_bias(4))
        assert not np.any(bias)


SCALED = [
    dict(scaling="linear", scaling_factor=4.0),
    dict(scaling="ntk", scaling_factor=4.0),
    dict(scaling="yarn", scaling_factor=4.0, trained_length=64),
    dict(scaling="yarn", scaling_factor=8.0, trained_length=512),
]


def tables_of(n, head_dim=16, max_wavelength=10000.0, **scaling):
    layer = RotaryPositionTables(
        head_dim=head_dim,
        max_sequence_length=max(n, 1),
        max_wavelength=max_wavelength,
        **scaling,
    )
    return keras.ops.convert_to_numpy(layer(np.zeros((1, n), "int32")))


def reference_tables(n, frequency, temperature):
    angle = np.arange(n)[:, None, None] * frequency  # (n, 1, d/2)
    cos, sin = np.cos(angle), np.sin(angle)
    signed = np.concatenate([-sin, sin], -1)
    return temperature * np.stack([np.concatenate([cos, cos], -1), signed])


class RotaryScalingTest(TestCase):
    @parameterized.parameters(*SCALED)
    def test_tables_match_numpy(self, **scaling):
        head_dim, n = 16, 100
        frequency = ref.rope_scaled_frequency(
            head_dim,
            10000.0,
            scaling["scaling"],
            scaling["scaling_factor"],
            scaling.get("trained_length"),
        )
        assert_allclose(
            rope_frequencies(head_dim, 10000.0, **_frequency_args(scaling)),
            frequency,
            rtol=1e-12,
        )
        temperature = 1.0
        if scaling["scaling"] == "yarn":
            temperature = ref.yarn_temperature(scaling["scaling_factor"])
        assert_allclose(
            tables_of(n, head_dim, **scaling),
            reference_tables(n, frequency, temperature),
            atol=3e-5,
        )
        # Rotating with the tables is the NumPy rotation.
        x = np.random.default_rng(2).normal(size=(2, n, 3, head_dim))
        assert_allclose(
            keras.ops.convert_to_numpy(
                rotate(x.astype("float32"), tables_of(n, head_dim, **scaling))
            ),
            ref.rope_rotate(x, frequency=frequency, temperature=temperature),
            atol=1e-4,
        )

    def test_linear_at_s_times_i_is_unscaled_at_i(self):
        for factor in (2, 4, 8):
            scaled = tables_of(8 * 16, scaling="linear", scaling_factor=factor)
            unscaled = tables_of(16)
            assert_allclose(scaled[:, ::factor][:, :16], unscaled, atol=2e-6)
            assert not allclose(scaled[:, :16], unscaled, atol=1e-3)

    def test_ntk_changes_the_base(self):
        d, factor = 16, 4.0
        assert_allclose(
            tables_of(64, d, scaling="ntk", scaling_factor=factor),
            tables_of(64, d, max_wavelength=10000.0 * factor ** (d / (d - 2))),
            atol=1e-6,
        )
        frequency = rope_frequencies(d, 10000.0, "ntk", factor)
        plain = rope_frequencies(d, 10000.0)
        # The fastest pair is kept, the slowest one is interpolated by s.
        assert frequency[0] == plain[0]
        assert_allclose(frequency[-1], plain[-1] / factor)
        assert np.all(np.diff(frequency / plain) < 0)

    def test_yarn_interpolates_the_slow_pairs_and_keeps_the_fast_ones(self):
        d, factor, trained = 32, 4.0, 512
        plain = rope_frequencies(d, 10000.0)
        frequency = rope_frequencies(d, 10000.0, "yarn", factor, trained)
        rotations = trained * plain / (2 * np.pi)
        slow, fast = rotations < 1, rotations > 32
        middle = ~slow & ~fast
        # d = 32, T = 512: pairs of each kind.
        assert slow.any() and fast.any() and middle.any()
        assert_allclose(frequency[slow], plain[slow] / factor)
        assert_allclose(frequency[fast], plain[fast])
        gamma = (frequency[middle] - plain[middle] / factor) / (
            plain[middle] - plain[middle] / factor
        )
        assert_allclose(gamma, (rotations[middle] - 1) / 31)
        # Queries and keys each carry 0.1 ln(s) + 1, the logits its square.
        tables = tables_of(
            8, d, scaling="yarn", scaling_factor=factor, trained_length=trained
        )
        q = np.random.default_rng(3).normal(size=(1, 8, 1, d)).astype("f4")
        logits = np.einsum("bihd,bjhd->ij", *[rotate(q, tables)] * 2)
        unit = np.einsum(
            "bihd,bjhd->ij", *[rotate(q, tables / tables[0, 0, 0, 0])] * 2
        )
        assert_allclose(
            logits, (0.1 * np.log(factor) + 1) ** 2 * unit, rtol=1e-5
        )

    def test_factor_one_is_unscaled(self):
        unscaled = tables_of(64)
        for scaling in ("linear", "ntk", "yarn"):
            trained = 16 if scaling == "yarn" else None
            assert_allclose(
                tables_of(64, scaling=scaling, trained_length=trained),
                unscaled,
                atol=1e-6,
            )

    def test_bad_scaling_is_refused(self):
        cases = [
            (dict(scaling="linear", scaling_factor=0.5), "rope_scaling_factor"),
            (dict(scaling="log"), "`rope_scaling` must be one of"),
            (dict(scaling="yarn", scaling_factor=2.0), "rope_trained_length"),
            (dict(scaling="linear", trained_length=64), "rope_trained_length"),
            (dict(scaling_factor=2.0), "needs `rope_scaling`"),
            (
                dict(scaling="yarn", scaling_factor=2.0, trained_length=0),
                "rope_trained_length` must be >= 1",
            ),
        ]
        for kwargs, message in cases:
            with pytest.raises(ValueError, match=message):
                RotaryPositionTables(
                    head_dim=8, max_sequence_length=8, **kwargs
                )
        with pytest.raises(ValueError, match="head size above 2"):
            RotaryPositionTables(
                head_dim=2, max_sequence_length=8, scaling="ntk"
            )


def _frequency_args(scaling):
    return dict(
        scaling=scaling["scaling"],
        factor=scaling["scaling_factor"],
        trained_length=scaling.get("trained_length"),
    )
