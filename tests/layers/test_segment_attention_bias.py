import numpy as np
from absl.testing import parameterized

from tests.test_case import TestCase
from tests.test_case import assert_allclose
from tests.test_case import to_numpy
from tupe_tf.layers import SegmentAttentionBias


class SegmentAttentionBiasTest(TestCase):
    def test_layer_basics(self):
        self.run_position_bias_test(
            cls=SegmentAttentionBias,
            init_kwargs={"num_layers": 2, "num_heads": 2, "num_segments": 3},
            input_data=np.array([[0, 0, 1, 2], [0, 1, 1, 1]], "int32"),
            expected_output_shape=(1, 2, 2, 4, 4),
            expected_num_trainable_weights=1,
        )

    @parameterized.parameters(
        ("layer-wise", 1, 4), ("head-wise", 3, 1), ("none", 3, 4)
    )
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
