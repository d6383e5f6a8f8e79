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
from tupe_tf.layers import DietAbsolutePositionBias


class DietAbsolutePositionBiasTest(TestCase):
    @parameterized.parameters(*SHARINGS_OF_3_LAYERS_OF_4_HEADS)
    def test_matches_numpy_spec(self, sharing, units, heads):
        layer = DietAbsolutePositionBias(
            num_layers=3,
            num_heads=4,
            max_sequence_length=10,
            rank=3,
            sharing=sharing,
        )
        layer.build()
        randomize(layer)
        n = 6
        bias = keras.ops.convert_to_numpy(layer(np.zeros((2, n), "int32")))
        assert bias.shape == (units, 1, heads, n, n)
        assert bias.dtype == np.float32
        assert layer.query_positions.shape == (units, heads, 10, 3)
        expected = ref.diet_absolute_bias(
            to_numpy(layer.query_positions).astype("float64"),
            to_numpy(layer.key_positions).astype("float64"),
            n,
        )
        assert_allclose(bias[:, 0], expected, atol=1e-5)
        # Rank of each head's bias is at most the rank of the factorisation.
        head = bias[0, 0, 0].astype("float64")
        assert np.linalg.matrix_rank(head, tol=1e-4 * np.abs(head).max()) == 3

    def test_bad_rank(self):
        with pytest.raises(ValueError, match="position_rank"):
            DietAbsolutePositionBias(
                num_layers=2, num_heads=2, max_sequence_length=8, rank=0
            )
