import numpy as np
from absl.testing import parameterized

from tests import numpy_reference as ref
from tests.test_case import TestCase
from tests.test_case import assert_allclose
from tests.test_case import assert_array_equal
from tests.test_case import to_numpy
from tupe_tf.layers import RelativePositionBias
from tupe_tf.layers import relative_position_buckets


class RelativePositionBiasTest(TestCase):
    @parameterized.parameters(
        {"cls_buckets": False, "rows": 8}, {"cls_buckets": True, "rows": 9}
    )
    def test_layer_basics(self, cls_buckets, rows):
        init_kwargs = {
            "num_heads": 3,
            "max_sequence_length": 20,
            "num_buckets": 8,
            "max_distance": 10,
            "cls_buckets": cls_buckets,
        }
        self.run_position_bias_test(
            cls=RelativePositionBias,
            init_kwargs=init_kwargs,
            input_data=np.zeros((2, 7), "int32"),
            expected_output_shape=(1, 1, 3, 7, 7),
            expected_num_trainable_weights=1,
        )
        layer = RelativePositionBias(**init_kwargs)
        layer(np.zeros((1, 3), "int32"))
        assert layer.relative_attention_bias.shape == (rows, 3)

    @parameterized.parameters((32, 128), (16, 64), (8, 20))
    def test_buckets_match_scalar_t5_reference(self, buckets, distance):
        relative = np.arange(-300, 301)
        expected = [ref.t5_bucket(int(r), buckets, distance) for r in relative]
        assert_array_equal(
            relative_position_buckets(relative, buckets, distance), expected
        )

    def test_bucket_layout(self):
        buckets = relative_position_buckets(np.arange(-200, 201), 32, 128)
        exact = {r: b for r, b in zip(range(-200, 201), buckets)}
        # Distances below 32/4 = 8 each own a bucket, per direction.
        assert [exact[-r] for r in range(0, 8)] == list(range(0, 8))
        assert [exact[r] for r in range(1, 8)] == list(range(17, 24))
        # Clamped beyond the maximum distance; directions kept apart.
        assert exact[-128] == exact[-200] == 15 and exact[200] == 31
        assert buckets.max() == 31 and buckets.min() == 0

    def test_layer_output(self):
        layer = RelativePositionBias(
            num_heads=3, max_sequence_length=20, num_buckets=8, max_distance=10
        )
        bias = to_numpy(layer(np.zeros((2, 7), "int32")))
        assert bias.shape == (1, 1, 3, 7, 7)
        table = to_numpy(layer.relative_attention_bias)
        for i in range(7):
            for j in range(7):
                assert_allclose(
                    bias[0, 0, :, i, j], table[ref.t5_bucket(j - i, 8, 10)]
                )

    def test_cls_buckets_layout(self):
        layer = RelativePositionBias(
            num_heads=2,
            max_sequence_length=12,
            num_buckets=8,
            max_distance=10,
            cls_buckets=True,
        )
        bias = to_numpy(layer(np.zeros((1, 6), "int32")))
        table = to_numpy(layer.relative_attention_bias)
        assert table.shape == (9, 2)
        for i in range(6):
            for j in range(6):
                bucket = (
                    4
                    if i == 0
                    else 8
                    if j == 0
                    else ref.t5_bucket(j - i, 8, 10)
                )
                assert_allclose(bias[0, 0, :, i, j], table[bucket])
        # Bucket 4 (= 8 / 2) is never produced by the bucket function.
        assert 4 not in relative_position_buckets(np.arange(-50, 51), 8, 10)
