import keras
import numpy as np

from tests import numpy_reference as ref
from tests.test_case import TestCase
from tupe_tf.layers import BiasedMultiHeadAttention


class BiasedMultiHeadAttentionTest(TestCase):
    def test_layer_basics(self):
        x = np.random.default_rng(0).normal(size=(2, 6, 16)).astype("float32")
        self.run_layer_test(
            cls=BiasedMultiHeadAttention,
            init_kwargs={"num_heads": 4, "key_dim": 4, "content_scale": 0.3},
            input_data={"query": x, "value": x},
            expected_output_shape=(2, 6, 16),
            expected_num_trainable_weights=8,
        )

    def test_matches_numpy_and_keras_attention_without_bias(self):
        rng = np.random.default_rng(0)
        x = rng.normal(size=(2, 6, 16)).astype("float32")
        mask = np.array([[1] * 6, [1] * 4 + [0] * 2], "int32")
        bias = rng.normal(size=(1, 4, 6, 6)).astype("float32")
        layer = BiasedMultiHeadAttention(
            num_heads=4, key_dim=4, content_scale=0.3
        )
        out, probs = layer(
            x,
            x,
            attention_mask=mask,
            attention_bias=bias,
            return_attention_scores=True,
        )
        w = {
            name: keras.ops.convert_to_numpy(getattr(layer, name).kernel)
            for name in ("query_dense", "key_dense")
        }
        b = {
            name: keras.ops.convert_to_numpy(getattr(layer, name).bias)
            for name in ("query_dense", "key_dense")
        }
        expected = ref.attention_probabilities(
            x,
            w["query_dense"],
            b["query_dense"],
            w["key_dense"],
            b["key_dense"],
            0.3,
            bias,
            mask,
        )
        np.testing.assert_allclose(probs, expected, atol=1e-5)
        assert probs.dtype == "float32"

        # With no bias and the default scale it is keras' MultiHeadAttention.
        plain = BiasedMultiHeadAttention(num_heads=4, key_dim=4)
        keras_mha = keras.layers.MultiHeadAttention(num_heads=4, key_dim=4)
        plain(x, x)
        keras_mha(x, x)
        keras_mha.set_weights(plain.get_weights())
        np.testing.assert_allclose(
            plain(x, x, attention_mask=mask),
            keras_mha(x, x, attention_mask=mask[:, None, :].astype(bool)),
            atol=1e-5,
        )
        self.run_serialization_test(
            BiasedMultiHeadAttention(num_heads=4, key_dim=4)
        )

    def test_attention_dropout_is_applied_in_training_only(self):
        x = np.random.default_rng(1).normal(size=(2, 8, 16)).astype("float32")
        layer = BiasedMultiHeadAttention(num_heads=2, key_dim=8, dropout=0.5)
        inference = [np.asarray(layer(x, x, training=False)) for _ in range(2)]
        training = [np.asarray(layer(x, x, training=True)) for _ in range(2)]
        np.testing.assert_allclose(inference[0], inference[1])
        assert not np.allclose(training[0], training[1])
