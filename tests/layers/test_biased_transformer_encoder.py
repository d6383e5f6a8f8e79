import keras
import keras_hub
import numpy as np
import pytest

from tests import numpy_reference as ref
from tests.test_case import TestCase
from tests.test_case import assert_allclose
from tupe_tf.layers import BiasedMultiHeadAttention
from tupe_tf.layers import BiasedTransformerEncoder
from tupe_tf.layers import ShawRelativeLogits


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(2, 6, 16)).astype("float32")
    mask = np.array([[1] * 6, [1] * 4 + [0] * 2], "int32")
    return x, mask


class BiasedTransformerEncoderTest(TestCase):
    def test_layer_basics(self):
        x, _ = _inputs()
        # A single input: `build` takes the input shape only, as
        # keras-hub's TransformerEncoder does.
        self.run_layer_test(
            cls=BiasedTransformerEncoder,
            init_kwargs={
                "intermediate_dim": 32,
                "num_heads": 4,
                "content_scale": 0.3,
            },
            input_data=x,
            expected_output_shape=(2, 6, 16),
            expected_num_trainable_weights=16,
        )

    def test_layer_basics_with_query_logits(self):
        x, _ = _inputs()
        shaw = ShawRelativeLogits(head_dim=4, max_distance=3, name="shaw")
        self.run_layer_test(
            cls=BiasedTransformerEncoder,
            init_kwargs={
                "intermediate_dim": 32,
                "num_heads": 4,
                "query_logits": keras.layers.serialize(shaw),
            },
            input_data=x,
            expected_output_shape=(2, 6, 16),
            expected_num_trainable_weights=17,
            # The hook keeps the policy it was given (the backbone gives it
            # the model's): tests/models' mixed-precision tests cover it.
            run_precision_checks=False,
        )

    def test_query_logits_layer_is_owned_and_used(self):
        x, mask = _inputs(2)
        shaw = ShawRelativeLogits(head_dim=4, max_distance=3, name="shaw")
        layer = BiasedTransformerEncoder(
            intermediate_dim=32, num_heads=4, query_logits=shaw
        )
        layer(x)
        owned = [w.path for w in layer.weights if w is shaw.relative_keys]
        assert owned == [f"{layer.name}/shaw/relative_keys"]
        _, probs = layer(x, padding_mask=mask, return_attention_scores=True)
        logits = keras.ops.convert_to_numpy(layer.attention_logits(x))
        logits = np.where(mask[:, None, None, :].astype(bool), logits, -np.inf)
        assert_allclose(ref.softmax(logits), probs, atol=1e-5)
        # The table moves the attention: zeroing it changes the output.
        before = keras.ops.convert_to_numpy(layer(x, padding_mask=mask))
        shaw.relative_keys.assign(np.zeros((7, 4), "float32") + 0.5)
        after = keras.ops.convert_to_numpy(layer(x, padding_mask=mask))
        assert np.abs(after - before).max() > 1e-4
        clone = BiasedTransformerEncoder.from_config(layer.get_config())
        clone(x)
        clone.set_weights(layer.get_weights())
        assert_allclose(clone(x, padding_mask=mask), after, atol=1e-6)

    def test_without_bias_equals_keras_hub_transformer_encoder(self):
        x, mask = _inputs()
        ours = BiasedTransformerEncoder(intermediate_dim=32, num_heads=4)
        theirs = keras_hub.layers.TransformerEncoder(
            intermediate_dim=32, num_heads=4
        )
        ours(x)
        theirs(x)
        assert [v.path.split("/", 1)[1] for v in ours.weights] == [
            v.path.split("/", 1)[1] for v in theirs.weights
        ]
        theirs.set_weights(ours.get_weights())
        assert_allclose(
            ours(x, padding_mask=mask), theirs(x, padding_mask=mask), atol=1e-5
        )

    def test_attention_accessor_and_logits_give_the_probabilities(self):
        x, mask = _inputs(1)
        layer = BiasedTransformerEncoder(
            intermediate_dim=32, num_heads=4, content_scale=0.2
        )
        bias = np.random.default_rng(2).normal(size=(1, 4, 6, 6))
        offsets = np.random.default_rng(3).normal(size=(2, 6, 4, 4))
        _, probs = layer(
            x,
            padding_mask=mask,
            attention_bias=bias.astype("float32"),
            query_key_offsets=offsets.astype("float32"),
            return_attention_scores=True,
        )
        assert isinstance(layer.attention_layer, BiasedMultiHeadAttention)
        assert layer.attention_layer.content_scale == 0.2
        logits = keras.ops.convert_to_numpy(
            layer.attention_logits(
                x,
                attention_bias=bias.astype("float32"),
                query_key_offsets=offsets.astype("float32"),
            )
        )
        logits = np.where(mask[:, None, None, :].astype(bool), logits, -np.inf)
        assert_allclose(ref.softmax(logits), probs, atol=1e-5)

    def test_bad_width(self):
        with pytest.raises(ValueError, match="divisible"):
            BiasedTransformerEncoder(intermediate_dim=8, num_heads=3)(
                np.zeros((1, 2, 16), "float32")
            )
