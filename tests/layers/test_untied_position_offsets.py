import math

import keras
import numpy as np
import pytest

from tests import numpy_reference as ref
from tests.layers.layer_weights import untied_weights
from tests.test_case import TestCase
from tests.test_case import allclose
from tests.test_case import assert_allclose
from tests.test_case import assert_array_equal
from tests.test_case import randomize
from tupe_tf.layers import UntiedPositionOffsets


class UntiedPositionOffsetsTest(TestCase):
    def test_offsets_and_position_term_match_numpy(self):
        layer = UntiedPositionOffsets(
            num_heads=2, hidden_dim=16, max_sequence_length=12
        )
        layer.build()
        randomize(layer, seed=1)
        n = 7
        offsets = keras.ops.convert_to_numpy(layer(np.zeros((2, n), "int32")))
        assert offsets.shape == (2, n, 2, 8) and offsets.dtype == np.float32
        assert layer.position_embeddings.shape == (12, 16)
        query, key = ref.untied_offsets(untied_weights(layer), n, 2)
        assert_allclose(offsets[0], query, atol=1e-5)
        assert_allclose(offsets[1], key, atol=1e-5)
        term = keras.ops.convert_to_numpy(layer.content_free_bias(n))
        expected = np.einsum("ihd,jhd->hij", query, key) / math.sqrt(4 * 8)
        assert_allclose(term[0, 0], expected, atol=1e-5)

    def test_fold(self):
        layer = UntiedPositionOffsets(
            num_heads=4, hidden_dim=32, max_sequence_length=8, scale=0.5
        )
        tokens = np.zeros((1, 5), "int32")
        before = keras.ops.convert_to_numpy(layer(tokens))
        layer.fold([5])
        layer.position_embeddings.assign(layer.position_embeddings + 1.0)
        assert_array_equal(layer(tokens), before)
        layer.unfold()
        assert not allclose(layer(tokens), before)

    def test_refuses_indivisible_width(self):
        with pytest.raises(ValueError, match="divisible"):
            UntiedPositionOffsets(
                num_heads=3, hidden_dim=16, max_sequence_length=8
            )
