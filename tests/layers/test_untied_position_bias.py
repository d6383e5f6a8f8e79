import keras
import numpy as np
import pytest

from tests import numpy_reference as ref
from tests.layers.layer_weights import randomize
from tests.layers.layer_weights import untied_weights
from tupe_tf.layers import UntiedPositionBias
from tupe_tf.layers import reset_cls


@pytest.mark.parametrize(
    "untie_cls, relative_buckets",
    [(True, None), (False, None), (True, 8), (False, 8)],
)
def test_matches_numpy_spec(untie_cls, relative_buckets):
    layer = UntiedPositionBias(
        num_heads=2,
        hidden_dim=16,
        max_sequence_length=12,
        untie_cls=untie_cls,
        relative_buckets=relative_buckets,
        relative_max_distance=10,
    )
    layer.build()
    randomize(layer)
    n = 9
    bias = keras.ops.convert_to_numpy(layer(np.zeros((3, n), "int32")))
    assert bias.shape == (1, 1, 2, n, n) and bias.dtype == np.float32
    rows = 12 + (1 if untie_cls else 0)
    assert layer.position_embeddings.shape == (rows, 16)
    relative = None
    if relative_buckets:
        relative = keras.ops.convert_to_numpy(
            layer.relative_position_bias.relative_attention_bias
        ).astype("float64")
    expected = ref.tupe_bias(
        untied_weights(layer), n, 2, untie_cls, relative, 8, 10
    )
    np.testing.assert_allclose(bias[0, 0], expected, atol=1e-5)
    assert layer.content_free_bias(n).shape == (1, 1, 2, n, n)


def test_reset_cls_rewrites_row_and_column():
    bias = np.arange(2 * 4 * 4, dtype="float32").reshape(2, 4, 4)
    out = keras.ops.convert_to_numpy(
        reset_cls(bias, np.array([-1.0, -2.0]), np.array([7.0, 8.0]))
    )
    expected = bias.copy()
    expected[:, 1:, 0] = np.array([7.0, 8.0])[:, None]
    expected[:, 0, :] = np.array([-1.0, -2.0])[:, None]
    np.testing.assert_array_equal(out, expected)


def test_config_round_trip():
    layer = UntiedPositionBias(
        num_heads=4, hidden_dim=32, max_sequence_length=8, relative_buckets=8
    )
    clone = UntiedPositionBias.from_config(layer.get_config())
    assert clone.get_config() == layer.get_config()


def test_refuses_indivisible_width():
    with pytest.raises(ValueError, match="divisible"):
        UntiedPositionBias(num_heads=3, hidden_dim=16, max_sequence_length=8)
