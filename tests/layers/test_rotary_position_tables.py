import keras
import keras_hub
import numpy as np
import pytest

from tests import numpy_reference as ref
from tests.test_case import TestCase
from tupe_tf.layers import RotaryPositionTables
from tupe_tf.layers.rotary_position_tables import rotate


class RotaryPositionTablesTest(TestCase):
    def test_layer_basics(self):
        self.run_position_bias_test(
            cls=RotaryPositionTables,
            init_kwargs={
                "head_dim": 8,
                "max_sequence_length": 16,
                "max_wavelength": 500,
            },
            input_data=np.zeros((2, 11), "int32"),
            expected_output_shape=(2, 11, 1, 8),
        )

    def test_rotation_matches_numpy_and_keras_hub(self):
        layer = RotaryPositionTables(head_dim=8, max_sequence_length=16)
        tables = layer(np.zeros((2, 11), "int32"))
        assert tables.shape == (2, 11, 1, 8) and tables.dtype == "float32"
        x = np.random.default_rng(0).normal(size=(2, 11, 3, 8))
        x = x.astype("float32")
        rotated = keras.ops.convert_to_numpy(rotate(x, tables))
        np.testing.assert_allclose(
            rotated, ref.rope_rotate(x.astype("float64")), atol=1e-5
        )
        np.testing.assert_allclose(
            rotated,
            keras_hub.layers.RotaryEmbedding()(x),
            atol=1e-5,
        )
        np.testing.assert_allclose(
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
            np.testing.assert_allclose(
                logits[shift:, shift:], logits[:-shift, :-shift], atol=1e-4
            )
        assert not np.allclose(logits[0, 1], logits[0, 2])

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
