import keras
import numpy as np
import pytest
from absl.testing import parameterized

from tests import numpy_reference as ref
from tests.layers.layer_weights import untied_weights
from tests.test_case import TestCase
from tests.test_case import allclose
from tests.test_case import assert_allclose
from tests.test_case import assert_array_equal
from tests.test_case import randomize
from tupe_tf.layers import UntiedPositionBias
from tupe_tf.layers import reset_cls


class UntiedPositionBiasTest(TestCase):
    @parameterized.parameters(
        (True, None), (False, None), (True, 8), (False, 8)
    )
    def test_matches_numpy_spec(self, untie_cls, relative_buckets):
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
        assert_allclose(bias[0, 0], expected, atol=1e-5)
        assert layer.content_free_bias(n).shape == (1, 1, 2, n, n)

    def test_reset_cls_rewrites_row_and_column(self):
        bias = np.arange(2 * 4 * 4, dtype="float32").reshape(2, 4, 4)
        out = keras.ops.convert_to_numpy(
            reset_cls(bias, np.array([-1.0, -2.0]), np.array([7.0, 8.0]))
        )
        expected = bias.copy()
        expected[:, 1:, 0] = np.array([7.0, 8.0])[:, None]
        expected[:, 0, :] = np.array([-1.0, -2.0])[:, None]
        assert_array_equal(out, expected)

    def test_refuses_indivisible_width(self):
        with pytest.raises(ValueError, match="divisible"):
            UntiedPositionBias(
                num_heads=3, hidden_dim=16, max_sequence_length=8
            )

    def test_reference_cls_layout_matches_numpy(self):
        layer = UntiedPositionBias(
            num_heads=2,
            hidden_dim=16,
            max_sequence_length=12,
            relative_buckets=8,
            relative_max_distance=10,
            cls_relative="reference",
        )
        layer.build()
        randomize(layer, seed=4)
        n = 10
        bias = keras.ops.convert_to_numpy(layer(np.zeros((1, n), "int32")))
        relative = keras.ops.convert_to_numpy(
            layer.relative_position_bias.relative_attention_bias
        ).astype("float64")
        assert relative.shape == (9, 2)  # one extra bucket for the [CLS] column
        expected = ref.tupe_reference_layout_bias(
            untied_weights(layer), n, 2, relative, 8, 10
        )
        assert_allclose(bias[0, 0], expected, atol=1e-5)
        # Not the paper's layout: the [CLS] row is no longer one value per head.
        assert np.std(bias[0, 0, :, 0, 1:], axis=-1).max() < 1e-6
        reset = ref.tupe_bias(
            untied_weights(layer), n, 2, True, relative, 8, 10
        )
        assert not allclose(bias[0, 0, :, 1:, 0], reset[:, 1:, 0])

    def test_layer_norm_epsilon_is_the_reference_value(self):
        layer = UntiedPositionBias(
            num_heads=2, hidden_dim=16, max_sequence_length=8
        )
        assert layer.position_layer_norm.epsilon == 1e-5
        assert layer.cls_relative == "reset"

    @parameterized.parameters(
        (dict(cls_relative="paper"), "cls_relative.*reference"),
        (dict(cls_relative="reference"), "untie_cls"),
        (
            dict(cls_relative="reference", relative_buckets=8, untie_cls=False),
            "untie_cls=False",
        ),
    )
    def test_bad_cls_relative_is_refused(self, kwargs, match):
        with pytest.raises(ValueError, match=match):
            UntiedPositionBias(
                num_heads=2, hidden_dim=16, max_sequence_length=8, **kwargs
            )
