import keras
import numpy as np
import pytest
from keras import ops
from keras.backend import standardize_dtype

from tests.test_case import assert_array_equal
from tests.test_case import tensorflow_only
from tupe_tf.layers import PositionBiasLayer


class LengthBias(PositionBiasLayer):
    """`beta[i, j] = w * (j - i)`: one weight, easy to check."""

    num_heads = 1

    def build(self, input_shape=None):
        self.w = self.add_weight(name="w", shape=(), initializer="ones")
        self.built = True

    def compute_bias(self, sequence_length):
        index = ops.arange(sequence_length, dtype="float32")
        return (index[None, :] - index[:, None])[None, None, None] * self.w


def test_float32_under_mixed_policy_and_call_uses_only_length():
    keras.config.set_dtype_policy("mixed_bfloat16")
    layer = LengthBias(max_sequence_length=6)
    bias = layer(np.zeros((3, 4, 7), "float32"))
    assert (
        layer.compute_dtype == "float32"
        and standardize_dtype(bias.dtype) == "float32"
    )
    assert bias.shape == (1, 1, 1, 4, 4)
    assert_array_equal(
        layer.content_free_bias(4), bias
    )  # a bias layer's content-free part is its output
    assert "dtype" not in layer.get_config()


def test_fold_freezes_only_the_folded_lengths():
    layer = LengthBias(max_sequence_length=6)
    layer(np.zeros((1, 3), "int32"))
    layer.fold([3])
    layer.w.assign(2.0)
    three = ops.convert_to_numpy(layer(np.zeros((1, 3), "int32")))
    four = ops.convert_to_numpy(layer(np.zeros((1, 4), "int32")))
    assert three[0, 0, 0, 0, 2] == 2.0  # folded with w = 1
    assert four[0, 0, 0, 0, 3] == 6.0  # follows the weight
    layer.unfold()
    assert ops.convert_to_numpy(layer(np.zeros((1, 3), "int32")))[
        0, 0, 0, 0, 2
    ] == pytest.approx(4.0)


def test_too_long_is_refused():
    layer = LengthBias(max_sequence_length=6)
    with pytest.raises(ValueError, match="max_sequence_length=6"):
        layer(np.zeros((1, 7), "int32"))


def test_output_shape_is_declared():
    layer = LengthBias(max_sequence_length=6)
    symbolic = layer(keras.Input((None,), dtype="int32"))
    assert symbolic.shape == (1, 1, 1, None, None)
    assert symbolic.dtype == "float32"


@tensorflow_only("a graph with a dynamic length")
def test_too_long_dynamic_length_is_refused_in_the_graph():
    import tensorflow as tf

    layer = LengthBias(max_sequence_length=6)
    dynamic = tf.function(
        layer, input_signature=[tf.TensorSpec([None, None], tf.int32)]
    )
    with pytest.raises(tf.errors.InvalidArgumentError, match="=6"):
        dynamic(np.zeros((1, 7), "int32"))
