import numpy as np
import pytest

from tests.test_case import tensorflow_only
from tupe_tf.layers.sequence_length import checked_sequence_length


def test_static_length_is_returned_or_refused():
    assert checked_sequence_length(np.zeros((2, 5)), 5) == 5
    assert checked_sequence_length(np.zeros((2, 3, 9)), 9, axis=2) == 9
    with pytest.raises(ValueError, match="max_sequence_length=4.*length 5"):
        checked_sequence_length(np.zeros((2, 5)), 4)


@tensorflow_only("a graph with a dynamic length")
def test_dynamic_length_gets_a_graph_assertion():
    import tensorflow as tf

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.float32)])
    def length(x):
        return checked_sequence_length(x, 4)

    assert int(length(np.zeros((1, 4), "float32"))) == 4
    with pytest.raises(
        tf.errors.InvalidArgumentError, match="max_sequence_length=4"
    ):
        length(np.zeros((1, 5), "float32"))
