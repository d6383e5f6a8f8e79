import keras
import numpy as np
import pytest
from absl.testing import parameterized

from tests import numpy_reference as ref
from tests.layers.layer_weights import SHARINGS_OF_3_LAYERS_OF_4_HEADS
from tests.test_case import TestCase
from tests.test_case import assert_allclose
from tests.test_case import randomize
from tests.test_case import to_numpy
from tupe_tf.layers import DietRelativePositionBias


class DietRelativePositionBiasTest(TestCase):
    @parameterized.parameters(*SHARINGS_OF_3_LAYERS_OF_4_HEADS)
    def test_matches_numpy_spec(self, sharing, units, heads):
        layer = DietRelativePositionBias(
            num_layers=3, num_heads=4, max_sequence_length=8, sharing=sharing
        )
        layer.build()
        randomize(layer)
        bias = keras.ops.convert_to_numpy(layer(np.zeros((2, 8), "int32")))
        assert bias.shape == (units, 1, heads, 8, 8)
        assert bias.dtype == np.float32
        table = to_numpy(layer.relative_positions).astype("float64")
        assert table.shape == (units, heads, 15)
        assert_allclose(bias[:, 0], ref.diet_relative_bias(table, 8), atol=1e-6)
        # Shorter lengths are the top-left block (Toeplitz in j - i).
        short = keras.ops.convert_to_numpy(layer(np.zeros((1, 5), "int32")))
        assert_allclose(short, bias[..., :5, :5], atol=1e-6)

    def test_default_and_bad_sharing(self):
        layer = DietRelativePositionBias(
            num_layers=2, num_heads=2, max_sequence_length=8
        )
        assert layer.sharing == "none"
        with pytest.raises(ValueError, match="position_sharing"):
            DietRelativePositionBias(
                num_layers=2, num_heads=2, max_sequence_length=8, sharing="all"
            )
