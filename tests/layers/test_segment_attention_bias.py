import numpy as np
from absl.testing import parameterized

from tests.layers.layer_weights import SHARINGS_OF_3_LAYERS_OF_4_HEADS
from tests.test_case import TestCase
from tests.test_case import assert_allclose
from tests.test_case import to_numpy
from tupe_tf.layers import SegmentAttentionBias


class SegmentAttentionBiasTest(TestCase):
    @parameterized.parameters(*SHARINGS_OF_3_LAYERS_OF_4_HEADS)
    def test_segment_pairs_per_head(self, sharing, units, heads):
        layer = SegmentAttentionBias(
            num_layers=3, num_heads=4, num_segments=3, sharing=sharing
        )
        segments = np.array([[0, 0, 1, 2], [0, 1, 1, 1]], "int32")
        bias = to_numpy(layer(segments))
        assert bias.shape == (units, 2, heads, 4, 4)
        table = to_numpy(layer.segment_pairs)
        for u in range(units):
            for b in range(2):
                for i in range(4):
                    for j in range(4):
                        assert_allclose(
                            bias[u, b, :, i, j],
                            table[u, :, segments[b, i], segments[b, j]],
                            atol=1e-6,
                        )
