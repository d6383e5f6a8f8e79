import inspect

import keras
import numpy as np
import pytest
from keras.backend import standardize_dtype

from tests import numpy_reference as ref
from tests.test_case import TestCase
from tests.test_case import allclose
from tests.test_case import assert_allclose
from tests.test_case import randomize
from tests.test_case import to_numpy
from tupe_tf.layers import BiasedMultiHeadAttention
from tupe_tf.layers import ShawRelativeLogits
from tupe_tf.layers import biased_multi_head_attention as attention_module
from tupe_tf.layers.biased_multi_head_attention import use_fused_attention


def reference_probabilities(layer, x, bias, mask, dtype, **options):
    """`ref.attention_probabilities` of `x` with `layer`'s query and key
    weights and a content scale of 0.3, computed in `dtype`."""

    def weights(name):
        dense = getattr(layer, name)
        return [to_numpy(w).astype(dtype) for w in (dense.kernel, dense.bias)]

    query_kernel, query_bias = weights("query_dense")
    key_kernel, key_bias = weights("key_dense")
    return ref.attention_probabilities(
        x.astype(dtype),
        query_kernel,
        query_bias,
        key_kernel,
        key_bias,
        0.3,
        bias,
        mask,
        **options,
    )


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
        expected = reference_probabilities(layer, x, bias, mask, "float32")
        assert_allclose(probs, expected, atol=1e-5)
        assert standardize_dtype(probs.dtype) == "float32"

        # With no bias and the default scale it is keras' MultiHeadAttention.
        plain = BiasedMultiHeadAttention(num_heads=4, key_dim=4)
        keras_mha = keras.layers.MultiHeadAttention(num_heads=4, key_dim=4)
        plain(x, x)
        keras_mha(x, x)
        keras_mha.set_weights(plain.get_weights())
        assert_allclose(
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
        inference = [to_numpy(layer(x, x, training=False)) for _ in range(2)]
        training = [to_numpy(layer(x, x, training=True)) for _ in range(2)]
        assert_allclose(inference[0], inference[1])
        assert not allclose(training[0], training[1])


def attention_inputs(seed=0):
    """A batch with a padded row, a bias with a batch axis of 1, and the
    same layer's weights for both paths."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(2, 6, 16)).astype("float32")
    mask = np.array([[1] * 6, [1] * 4 + [0] * 2], "int32")
    bias = rng.normal(0, 2, size=(1, 4, 6, 6)).astype("float32")
    return x, mask, bias


def run_path(monkeypatch, fused, policy):
    keras.config.set_dtype_policy(policy)
    monkeypatch.setattr(
        attention_module, "use_fused_attention", lambda *args: fused
    )
    layer = BiasedMultiHeadAttention(num_heads=4, key_dim=4, content_scale=0.3)
    x, mask, bias = attention_inputs()
    layer(x, x)
    randomize(layer)
    output = layer(x, x, attention_mask=mask, attention_bias=bias)
    return keras.ops.convert_to_numpy(keras.ops.cast(output, "float32"))


@pytest.mark.parametrize(
    "policy, tolerance",
    [("float32", 1e-5), ("mixed_float16", 2e-3), ("mixed_bfloat16", 1e-2)],
)
def test_fused_and_explicit_paths_agree(monkeypatch, policy, tolerance):
    explicit = run_path(monkeypatch, False, policy)
    if keras.backend.backend() == "torch":
        # Why the rule keeps PyTorch on the explicit path.
        with pytest.raises(ValueError, match="Only one of `bias` and `mask`"):
            run_path(monkeypatch, True, policy)
        return
    fused = run_path(monkeypatch, True, policy)
    scale = np.abs(explicit).max()
    assert_allclose(fused, explicit, atol=tolerance * scale)


def count_fused_calls(monkeypatch, layer, x, **kwargs):
    calls = []
    fused = keras.ops.dot_product_attention

    def counting(*args, **call_kwargs):
        calls.append(1)
        return fused(*args, **call_kwargs)

    monkeypatch.setattr(keras.ops, "dot_product_attention", counting)
    layer(x, x, **kwargs)
    return len(calls)


def test_each_path_runs_where_the_rule_says(monkeypatch):
    x, mask, bias = attention_inputs()
    layer = BiasedMultiHeadAttention(num_heads=4, key_dim=4, dropout=0.1)
    arguments = {"attention_mask": mask, "attention_bias": bias}
    on_jax = keras.backend.backend() == "jax"
    assert count_fused_calls(monkeypatch, layer, x, **arguments) == on_jax
    for explicit in ({"training": True}, {"return_attention_scores": True}):
        calls = count_fused_calls(
            monkeypatch, layer, x, **arguments, **explicit
        )
        assert calls == 0, explicit
    no_dropout = BiasedMultiHeadAttention(num_heads=4, key_dim=4)
    calls = count_fused_calls(
        monkeypatch, no_dropout, x, training=True, **arguments
    )
    assert calls == on_jax
    # A padding mask alone (no bias): the explicit path everywhere.
    assert count_fused_calls(monkeypatch, layer, x, attention_mask=mask) == 0


@pytest.mark.parametrize(
    "backend, dropout, training, scores, bias, fused",
    [
        ("jax", 0.1, False, False, True, True),
        ("jax", 0.1, None, False, True, True),
        ("jax", 0.0, True, False, True, True),
        ("jax", 0.1, True, False, True, False),
        ("jax", 0.0, False, True, True, False),
        ("jax", 0.0, False, False, False, False),
        ("torch", 0.0, False, False, True, False),
        ("tensorflow", 0.0, False, False, True, False),
    ],
)
def test_fused_attention_rule(
    monkeypatch, backend, dropout, training, scores, bias, fused
):
    monkeypatch.setattr(keras.backend, "backend", lambda: backend)
    assert use_fused_attention(dropout, training, scores, bias) == fused


def test_query_logits_hook_joins_the_scaled_logits(monkeypatch):
    """The hook's term is added under the content scale, on both paths."""
    x, mask, bias = attention_inputs(seed=4)
    layer = BiasedMultiHeadAttention(num_heads=4, key_dim=4, content_scale=0.3)
    shaw = ShawRelativeLogits(head_dim=4, max_distance=2)
    layer(x, x)
    shaw.build()
    randomize(layer, seed=1)
    randomize(shaw, seed=2)
    arguments = dict(
        attention_mask=mask, attention_bias=bias, query_logits=shaw
    )
    explicit, probs = layer(x, x, return_attention_scores=True, **arguments)
    expected = reference_probabilities(
        layer,
        x,
        bias,
        mask,
        "float64",
        shaw_table=to_numpy(shaw.relative_keys).astype("float64"),
    )
    assert_allclose(probs, expected, atol=1e-5)
    logits = to_numpy(layer.attention_logits(x, x, bias, query_logits=shaw))
    logits = np.where(mask[:, None, None, :].astype(bool), logits, -np.inf)
    assert_allclose(ref.softmax(logits), expected, atol=1e-5)
    # Without `attention_bias` the hook's term alone is the bias.
    _, alone = layer(
        x,
        x,
        attention_mask=mask,
        query_logits=shaw,
        return_attention_scores=True,
    )
    assert not allclose(alone, probs, atol=1e-3)
    if keras.backend.backend() == "torch":
        return  # explicit only there (see the rule)
    monkeypatch.setattr(
        attention_module, "use_fused_attention", lambda *args: True
    )
    assert_allclose(layer(x, x, **arguments), explicit, atol=1e-5)


# Each argument of `keras.layers.MultiHeadAttention`, with a value for it
# and what that value changes in a built `BiasedMultiHeadAttention`, whose
# own `call` computes the attention: an argument whose feature it does not
# compute is refused (`refuse_unsupported_features`), not dropped.
MHA_BASE = {"num_heads": 4, "key_dim": 4}
REFUSED = object()


def _x():
    return np.random.default_rng(4).normal(size=(2, 6, 16)).astype("float32")


def _named(layer, name):
    return [v for v in layer.weights if v.name == name]


def _penalties(count):
    def check(layer, kwargs):
        assert len(layer.losses) == count

    return check


def _same_seed_same_dropout(layer, kwargs):
    twin = BiasedMultiHeadAttention(**kwargs)
    twin(_x(), _x())
    twin.set_weights(layer.get_weights())
    fresh = BiasedMultiHeadAttention(**kwargs)
    fresh(_x(), _x())
    fresh.set_weights(layer.get_weights())
    assert_allclose(
        twin(_x(), _x(), training=True), fresh(_x(), _x(), training=True)
    )


def _constrained(name):
    def check(layer, kwargs):
        variables = _named(layer, name)
        assert len(variables) == 4
        assert all(v.constraint is not None for v in variables)

    return check


MHA_ARGUMENT_EFFECTS = {
    "num_heads": (
        {"num_heads": 2},
        lambda layer, kw: layer.query_dense.kernel.shape == (16, 2, 4),
    ),
    "key_dim": (
        {"key_dim": 8},
        lambda layer, kw: layer.key_dense.kernel.shape == (16, 4, 8),
    ),
    "value_dim": (
        {"value_dim": 8},
        lambda layer, kw: layer.value_dense.kernel.shape == (16, 4, 8),
    ),
    "dropout": (
        {"dropout": 0.5},
        lambda layer, kw: (
            not allclose(
                layer(_x(), _x(), training=True), layer(_x(), _x()), atol=1e-4
            )
        ),
    ),
    "use_bias": (
        {"use_bias": False},
        lambda layer, kw: not _named(layer, "bias"),
    ),
    "output_shape": (
        {"output_shape": 12},
        lambda layer, kw: tuple(layer(_x(), _x()).shape) == (2, 6, 12),
    ),
    "attention_axes": ({"attention_axes": (2,)}, REFUSED),
    "sliding_window": ({"sliding_window": 2}, REFUSED),
    "flash_attention": ({"flash_attention": False}, REFUSED),
    "use_gate": ({"use_gate": True}, REFUSED),
    "kernel_initializer": (
        {"kernel_initializer": "zeros"},
        lambda layer, kw: not any(to_numpy(v).any() for v in layer.weights),
    ),
    "bias_initializer": (
        {"bias_initializer": "ones"},
        lambda layer, kw: all(
            (to_numpy(v) == 1).all() for v in _named(layer, "bias")
        ),
    ),
    "kernel_regularizer": ({"kernel_regularizer": "l2"}, _penalties(4)),
    "bias_regularizer": ({"bias_regularizer": "l2"}, _penalties(4)),
    "activity_regularizer": (
        {"activity_regularizer": "l2"},
        lambda layer, kw: len(layer.losses) >= 1,
    ),
    "kernel_constraint": (
        {"kernel_constraint": "non_neg"},
        _constrained("kernel"),
    ),
    "bias_constraint": ({"bias_constraint": "non_neg"}, _constrained("bias")),
    "seed": ({"seed": 7, "dropout": 0.5}, _same_seed_same_dropout),
}


def _mha_parameters():
    signature = inspect.signature(keras.layers.MultiHeadAttention.__init__)
    return [
        name
        for name, parameter in signature.parameters.items()
        if name != "self" and parameter.kind is parameter.POSITIONAL_OR_KEYWORD
    ]


@pytest.mark.parametrize("name", _mha_parameters())
def test_every_argument_of_the_parent_has_its_effect_or_is_refused(name):
    if name not in MHA_ARGUMENT_EFFECTS:
        pytest.fail(
            f"keras.layers.MultiHeadAttention takes `{name}`, which this "
            "test does not know: add the change it makes to a built "
            "BiasedMultiHeadAttention, or refuse it there."
        )
    changes, check = MHA_ARGUMENT_EFFECTS[name]
    kwargs = {**MHA_BASE, **changes}
    if check is REFUSED:
        with pytest.raises(ValueError, match=f"{name}="):
            BiasedMultiHeadAttention(**kwargs)
        return
    layer = BiasedMultiHeadAttention(**kwargs)
    layer(_x(), _x())
    assert check(layer, kwargs) is not False


def test_a_built_layers_config_is_not_refused():
    """A built layer's config holds `attention_axes=(1,)`: the default."""
    layer = BiasedMultiHeadAttention(num_heads=4, key_dim=4)
    layer(_x(), _x())
    assert layer.get_config()["attention_axes"] == (1,)
    clone = BiasedMultiHeadAttention.from_config(layer.get_config())
    clone(_x(), _x())
    clone.set_weights(layer.get_weights())
    assert_allclose(clone(_x(), _x()), layer(_x(), _x()))
