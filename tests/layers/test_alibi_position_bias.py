import keras
import numpy as np
import pytest

from tests import numpy_reference as ref
from tupe_tf.layers import AlibiPositionBias
from tupe_tf.layers.alibi_position_bias import alibi_slopes


@pytest.mark.parametrize("heads", [4, 6, 8, 12])
def test_slopes_match_the_spec(heads):
    np.testing.assert_allclose(
        alibi_slopes(heads), ref.alibi_slopes(heads), rtol=1e-6
    )


def test_known_slopes():
    np.testing.assert_allclose(alibi_slopes(4), [2**-2, 2**-4, 2**-6, 2**-8])
    # 6 heads: the 4-head slopes, then 2^-1 and 2^-3 of the 8-head ones.
    np.testing.assert_allclose(
        alibi_slopes(6), [2**-2, 2**-4, 2**-6, 2**-8, 2**-1, 2**-3]
    )


def test_symmetric_bias_and_config():
    layer = AlibiPositionBias(num_heads=6, max_sequence_length=16)
    bias = keras.ops.convert_to_numpy(layer(np.zeros((3, 9), "int32")))
    assert bias.shape == (1, 1, 6, 9, 9) and bias.dtype == np.float32
    np.testing.assert_allclose(bias[0, 0], ref.alibi_bias(6, 9), atol=1e-6)
    np.testing.assert_array_equal(bias, np.swapaxes(bias, -1, -2))
    assert layer.weights == []
    clone = AlibiPositionBias.from_config(layer.get_config())
    assert clone.get_config() == layer.get_config()
