import keras
import numpy as np
from absl.testing import parameterized
from keras_hub.layers import AlibiBias

from tests import numpy_reference as ref
from tests.test_case import TestCase
from tests.test_case import assert_allclose
from tests.test_case import assert_array_equal
from tupe_tf.layers import AlibiPositionBias
from tupe_tf.layers.alibi_position_bias import alibi_slopes


class AlibiPositionBiasTest(TestCase):
    @parameterized.parameters(4, 6, 8, 12)
    def test_slopes_match_the_spec(self, heads):
        assert_allclose(alibi_slopes(heads), ref.alibi_slopes(heads), rtol=1e-6)

    @parameterized.parameters(4, 6, 8, 12)
    def test_slopes_are_keras_hubs(self, heads):
        # keras-hub's AlibiBias adds `m_h * (0 - 1)` to the first of two
        # keys on zero scores.
        scores = np.zeros((1, heads, 1, 2), "float32")
        bias = AlibiBias(alibi_bias_max=8, dtype="float32")(scores)
        assert_allclose(
            alibi_slopes(heads),
            -keras.ops.convert_to_numpy(bias)[0, :, 0, 0],
            rtol=1e-6,
        )

    def test_known_slopes(self):
        assert_allclose(alibi_slopes(4), [2**-2, 2**-4, 2**-6, 2**-8])
        # 6 heads: the 4-head slopes, then 2^-1 and 2^-3 of the 8-head ones.
        assert_allclose(
            alibi_slopes(6), [2**-2, 2**-4, 2**-6, 2**-8, 2**-1, 2**-3]
        )

    def test_symmetric_bias(self):
        layer = AlibiPositionBias(num_heads=6, max_sequence_length=16)
        bias = keras.ops.convert_to_numpy(layer(np.zeros((3, 9), "int32")))
        assert bias.shape == (1, 1, 6, 9, 9) and bias.dtype == np.float32
        assert_allclose(bias[0, 0], ref.alibi_bias(6, 9), atol=1e-6)
        assert_array_equal(bias, np.swapaxes(bias, -1, -2))
        assert layer.weights == []
