import numpy as np
import pytest

from tupe_tf.layers import SegmentAttentionBias


@pytest.mark.parametrize(
    "sharing, units, heads",
    [("layer-wise", 1, 4), ("head-wise", 3, 1), ("none", 3, 4)],
)
def test_segment_pairs_per_head(sharing, units, heads):
    layer = SegmentAttentionBias(
        num_layers=3, num_heads=4, num_segments=3, sharing=sharing
    )
    segments = np.array([[0, 0, 1, 2], [0, 1, 1, 1]], "int32")
    bias = np.asarray(layer(segments))
    assert bias.shape == (units, 2, heads, 4, 4)
    table = np.asarray(layer.segment_pairs)
    for u in range(units):
        for b in range(2):
            for i in range(4):
                for j in range(4):
                    np.testing.assert_allclose(
                        bias[u, b, :, i, j],
                        table[u, :, segments[b, i], segments[b, j]],
                        atol=1e-6,
                    )
    clone = SegmentAttentionBias.from_config(layer.get_config())
    assert clone.get_config() == layer.get_config()
