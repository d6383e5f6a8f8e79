import inspect

import keras
import keras_hub
import numpy as np
import pytest

from tests import numpy_reference as ref
from tests.test_case import TestCase
from tests.test_case import allclose
from tests.test_case import assert_allclose
from tests.test_case import to_numpy
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


# Each argument of keras-hub's `TransformerEncoder` (0.32's, and the
# regularizers its main branch adds), with a value for it and what that
# value changes in a built `BiasedTransformerEncoder`. An argument of the
# parent must have its effect here or be refused: the parent's `build`
# (through which this layer is built) would honour it, and a layer that
# accepted it and then dropped it would train another model than asked.
BASE = {"intermediate_dim": 32, "num_heads": 4}


def _variables_named(layer, name):
    return [v for v in layer.weights if v.name == name]


def _shape_of(layer, path):
    (variable,) = [v for v in layer.weights if v.path.endswith("/" + path)]
    return tuple(variable.shape)


def _other_output_with_the_same_weights(layer, default, x):
    layer.set_weights(default.get_weights())
    assert not allclose(layer(x), default(x), atol=1e-4)


def _dropout_on_in_training(layer, default, x):
    assert allclose(default(x, training=True), default(x), atol=1e-6)
    assert not allclose(layer(x, training=True), layer(x), atol=1e-4)


def _all_kernels_zero(layer, default, x):
    kernels = _variables_named(layer, "kernel")
    assert len(kernels) == 6  # query, key, value, output, two dense
    assert all(not to_numpy(v).any() for v in kernels)


def _all_biases_one(layer, default, x):
    biases = _variables_named(layer, "bias")
    assert len(biases) == 6
    assert all((to_numpy(v) == 1).all() for v in biases)


def _weight_penalty_on(name):
    def check(layer, default, x):
        assert not default.losses
        # One penalty per kernel (or bias): the attention's four and the
        # feedforward's two.
        assert len(layer.losses) == len(_variables_named(layer, name)) == 6

    return check


def _output_penalty(layer, default, x):
    layer(x)
    default(x)
    assert not default.losses
    assert len(layer.losses) >= 1


PARENT_ARGUMENT_EFFECTS = {
    "intermediate_dim": (
        24,
        lambda layer, default, x: (
            _shape_of(layer, "feedforward_intermediate_dense/kernel")
            == (16, 24)
        ),
    ),
    "num_heads": (
        2,
        lambda layer, default, x: (
            _shape_of(layer, "self_attention_layer/query/kernel") == (16, 2, 8)
        ),
    ),
    "dropout": (0.5, _dropout_on_in_training),
    "activation": ("gelu", _other_output_with_the_same_weights),
    "layer_norm_epsilon": (10.0, _other_output_with_the_same_weights),
    "kernel_initializer": ("zeros", _all_kernels_zero),
    "bias_initializer": ("ones", _all_biases_one),
    "normalize_first": (True, _other_output_with_the_same_weights),
    "kernel_regularizer": ("l2", _weight_penalty_on("kernel")),
    "bias_regularizer": ("l2", _weight_penalty_on("bias")),
    "activity_regularizer": ("l2", _output_penalty),
}


def _parent_parameters():
    signature = inspect.signature(keras_hub.layers.TransformerEncoder.__init__)
    return [
        name
        for name, parameter in signature.parameters.items()
        if name != "self" and parameter.kind is parameter.POSITIONAL_OR_KEYWORD
    ]


@pytest.mark.parametrize(
    "name", sorted(set(_parent_parameters()) | set(PARENT_ARGUMENT_EFFECTS))
)
def test_every_argument_of_the_parent_has_its_effect_or_is_refused(name):
    if name not in PARENT_ARGUMENT_EFFECTS:
        pytest.fail(
            f"keras-hub's TransformerEncoder takes `{name}`, which this "
            "test does not know: add the change it makes to a built "
            "BiasedTransformerEncoder, or have BiasedTransformerEncoder "
            "refuse it."
        )
    value, check = PARENT_ARGUMENT_EFFECTS[name]
    x, _ = _inputs()
    default = BiasedTransformerEncoder(**BASE)
    default(x)
    try:
        layer = BiasedTransformerEncoder(**{**BASE, name: value})
        layer(x)
    except (TypeError, ValueError) as error:
        # Refused, naming the argument (keras-hub 0.32 has no regularizers
        # of its own: the unknown keyword is refused).
        assert f"`{name}`" in str(error) or f"{name}=" in str(error)
        return
    assert check(layer, default, x) is not False


def test_the_parent_builds_the_biased_attention_in_its_place():
    x, _ = _inputs()
    layer = BiasedTransformerEncoder(
        intermediate_dim=32, num_heads=4, content_scale=0.3, dropout=0.1
    )
    layer(x)
    attention = layer.attention_layer
    assert type(attention) is BiasedMultiHeadAttention
    assert attention.name == "self_attention_layer"
    assert (attention.content_scale, attention.dropout) == (0.3, 0.1)
    assert attention.key_dim == 4 and attention.num_heads == 4
    # The replaced `keras.layers.MultiHeadAttention` is not tracked: every
    # variable is the biased attention's or the parent's other layers'.
    assert len(layer.weights) == 16
    assert len(attention.weights) == 8


def test_initial_weights_are_keras_hubs_under_the_same_seed():
    """Building through the parent draws no seed more: a fixed seed gives
    the weights keras-hub's own encoder gets."""
    x, _ = _inputs()
    keras.utils.set_random_seed(7)
    ours = BiasedTransformerEncoder(intermediate_dim=32, num_heads=4)
    ours(x)
    keras.utils.set_random_seed(7)
    theirs = keras_hub.layers.TransformerEncoder(
        intermediate_dim=32, num_heads=4
    )
    theirs(x)
    for mine, their in zip(ours.weights, theirs.weights):
        assert_allclose(mine, their, atol=0)


def test_the_attention_keeps_every_argument_the_parent_gives_it():
    """What keras-hub's main branch adds (regularizers), or any other
    argument of the attention the parent makes, reaches the biased one."""
    layer = BiasedTransformerEncoder(
        intermediate_dim=32, num_heads=4, content_scale=0.3
    )
    theirs = keras.layers.MultiHeadAttention(
        num_heads=4,
        key_dim=4,
        value_dim=6,
        dropout=0.2,
        use_bias=False,
        kernel_initializer="he_normal",
        bias_initializer="ones",
        kernel_regularizer="l2",
        bias_regularizer="l1",
        activity_regularizer="l2",
        kernel_constraint="non_neg",
        bias_constraint="unit_norm",
        seed=3,
        name="self_attention_layer",
    )
    ours = layer.make_attention_layer(theirs)
    assert type(ours) is BiasedMultiHeadAttention
    config = ours.get_config()
    assert config.pop("content_scale") == 0.3
    assert config == theirs.get_config()
