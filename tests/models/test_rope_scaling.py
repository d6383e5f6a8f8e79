"""RoPE length extension at evaluation (`rope_scaling`) in `TupeBackbone`."""

import math

import keras
import numpy as np
import pytest
from keras.backend import standardize_dtype

import tupe_tf
from tests import numpy_reference as ref
from tests.sizes import encoder_sizes
from tests.test_case import allclose
from tests.test_case import assert_allclose
from tests.test_case import assert_array_equal
from tests.test_case import jit_compiled
from tests.test_case import randomize
from tests.test_case import to_numpy

VOCAB, HEADS, HIDDEN = 53, 2, 16
HEAD_DIM = HIDDEN // HEADS
SIZES = dict(
    encoder_sizes(HIDDEN, num_heads=HEADS),
    vocabulary_size=VOCAB,
)
# Trained at 8, evaluated at up to 4x.
TRAINED, LONGEST = 8, 32
SCALINGS = [
    dict(rope_scaling="linear", rope_scaling_factor=4.0),
    dict(rope_scaling="ntk", rope_scaling_factor=4.0),
    dict(rope_scaling="yarn", rope_scaling_factor=4.0, rope_trained_length=8),
]


def scaling_id(options):
    return options["rope_scaling"]


def make_backbone(dtype=None, **options):
    return tupe_tf.TupeBackbone(
        **SIZES,
        max_sequence_length=options.pop("max_sequence_length", LONGEST),
        position_encoding="rope",
        dtype=dtype,
        **options,
    )


def make_inputs(length, seed=0):
    rng = np.random.default_rng(seed)
    padding_mask = np.ones((2, length), "int32")
    padding_mask[1, length - 3 :] = 0
    segment_ids = np.zeros((2, length), "int32")
    segment_ids[:, length // 2 :] = 1
    return {
        "token_ids": rng.integers(1, VOCAB, (2, length)).astype("int32")
        * padding_mask,
        "segment_ids": segment_ids,
        "padding_mask": padding_mask,
    }


def sequence_output(backbone, inputs):
    return keras.ops.convert_to_numpy(backbone(inputs)["sequence_output"])


def np_(variable):
    return keras.ops.convert_to_numpy(variable).astype("float64")


@pytest.mark.parametrize("options", SCALINGS, ids=scaling_id)
def test_layer0_logits_match_numpy(options):
    """Layer 0's logits at 4x the trained length: `c (R'_i q_i).(R'_j k_j)`
    with the scaled angles and, for yarn, `t^2` on the product."""
    backbone = make_backbone(**options)
    randomize(backbone, seed=1)
    inputs = make_inputs(LONGEST)
    x = keras.Model(backbone.input, backbone.layer_inputs[0])(inputs)
    attention = backbone.transformer_layers[0].attention_layer
    q = np.einsum(
        "bnd,dhk->bnhk", np_(x), np_(attention.query_dense.kernel)
    ) + np_(attention.query_dense.bias)
    k = np.einsum(
        "bnd,dhk->bnhk", np_(x), np_(attention.key_dense.kernel)
    ) + np_(attention.key_dense.bias)
    frequency = ref.rope_scaled_frequency(
        HEAD_DIM,
        10000.0,
        options["rope_scaling"],
        options["rope_scaling_factor"],
        options.get("rope_trained_length"),
    )
    temperature = 1.0
    if options["rope_scaling"] == "yarn":
        temperature = ref.yarn_temperature(options["rope_scaling_factor"])
    q, k = (
        ref.rope_rotate(t, frequency=frequency, temperature=temperature)
        for t in (q, k)
    )
    expected = np.einsum("bqhk,bshk->bhqs", q, k) / math.sqrt(HEAD_DIM)
    actual = backbone.attention_logits(inputs)[0]
    assert_allclose(actual, expected, atol=1e-4)
    unscaled = make_backbone()
    unscaled.set_weights(backbone.get_weights())
    assert not allclose(unscaled.attention_logits(inputs)[0], actual, atol=1e-2)


@pytest.mark.parametrize("options", SCALINGS, ids=scaling_id)
def test_factor_one_is_the_unscaled_model(options):
    unscaled = make_backbone()
    randomize(unscaled, seed=2)
    scaled = make_backbone(**{**options, "rope_scaling_factor": 1.0})
    scaled.set_weights(unscaled.get_weights())
    inputs = make_inputs(LONGEST)
    assert_allclose(
        sequence_output(scaled, inputs),
        sequence_output(unscaled, inputs),
        atol=1e-5,
    )


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(rope_scaling="linear", rope_scaling_factor=0.5), ">= 1"),
        (dict(rope_scaling="log"), "`rope_scaling` must be one of"),
        (dict(rope_scaling="yarn", rope_scaling_factor=2.0), "trained_len"),
        (dict(rope_trained_length=8), "rope_trained_length"),
        (dict(rope_trained_length=0, rope_scaling="yarn"), ">= 1"),
        (dict(rope_scaling_factor=2.0), "needs `rope_scaling`"),
        (
            dict(position_encoding="tupe-r", rope_scaling="linear"),
            r"`rope_scaling` only applies to \['rope'\]",
        ),
        (
            dict(position_encoding="alibi", rope_scaling_factor=2.0),
            r"`rope_scaling_factor` only applies to \['rope'\]",
        ),
        (
            dict(position_encoding="bert", rope_trained_length=8),
            r"`rope_trained_length` only applies to \['rope'\]",
        ),
    ],
)
def test_bad_scaling_is_refused(kwargs, match):
    options = dict(SIZES, position_encoding="rope")
    with pytest.raises(ValueError, match=match):
        tupe_tf.TupeBackbone(**{**options, **kwargs})


def test_keras_file_round_trip_keeps_the_scaling(tmp_path):
    backbone = make_backbone(**SCALINGS[2])
    randomize(backbone, seed=3)
    path = str(tmp_path / "backbone.keras")
    backbone.save(path)
    restored = keras.saving.load_model(path)
    assert restored.get_config() == backbone.get_config()
    assert restored.rope_scaling == "yarn"
    inputs = make_inputs(LONGEST)
    assert_allclose(
        sequence_output(restored, inputs),
        sequence_output(backbone, inputs),
        atol=1e-6,
    )


def test_trained_preset_evaluated_with_a_scaling(tmp_path):
    """A preset trained unscaled at length 8, loaded with yarn at 4x."""
    trained = make_backbone(max_sequence_length=TRAINED)
    randomize(trained, seed=4)
    preset = str(tmp_path / "preset")
    trained.save_to_preset(preset)
    extended = tupe_tf.TupeBackbone.from_preset(
        preset, max_sequence_length=LONGEST, **SCALINGS[2]
    )
    assert extended.rope_scaling == "yarn"
    assert extended.max_sequence_length == LONGEST
    for loaded, original in zip(extended.weights, trained.weights):
        assert_array_equal(loaded, original)
    long_output = sequence_output(extended, make_inputs(LONGEST))
    assert np.isfinite(long_output).all()
    # Factor 1: the trained model's outputs at the trained length.
    same = tupe_tf.TupeBackbone.from_preset(
        preset, **{**SCALINGS[2], "rope_scaling_factor": 1.0}
    )
    inputs = make_inputs(TRAINED)
    assert_allclose(
        sequence_output(same, inputs),
        sequence_output(trained, inputs),
        atol=1e-5,
    )
    assert not allclose(
        sequence_output(extended, inputs),
        sequence_output(trained, inputs),
        atol=1e-3,
    )
    # Its own preset keeps the scaling.
    extended.save_to_preset(str(tmp_path / "extended"))
    again = tupe_tf.TupeBackbone.from_preset(str(tmp_path / "extended"))
    assert again.get_config() == extended.get_config()


@pytest.mark.parametrize("options", SCALINGS, ids=scaling_id)
def test_xla_and_fold(options):
    backbone = make_backbone(**options)
    randomize(backbone, seed=5)
    compiled = jit_compiled(lambda batch: backbone(batch)["sequence_output"])
    for length in (TRAINED, LONGEST):
        inputs = make_inputs(length)
        eager = sequence_output(backbone, inputs)
        assert_allclose(compiled(inputs), eager, atol=1e-5)
        backbone.fold_positional_bias([length])
        assert_allclose(sequence_output(backbone, inputs), eager, atol=1e-5)
        backbone.unfold_positional_bias()


@pytest.mark.parametrize("options", SCALINGS, ids=scaling_id)
def test_mixed_bfloat16(options):
    float_model = make_backbone(**options)
    randomize(float_model, seed=6)
    mixed = make_backbone(dtype="mixed_bfloat16", **options)
    mixed.set_weights(float_model.get_weights())
    tables = mixed.position_bias(np.zeros((1, LONGEST), "int32"))
    assert standardize_dtype(tables.dtype) == "float32"
    inputs = make_inputs(LONGEST)
    actual = mixed(inputs)["sequence_output"]
    assert standardize_dtype(actual.dtype) == "bfloat16"
    actual = to_numpy(keras.ops.cast(actual, "float32"))
    assert np.isfinite(actual).all()
    expected = sequence_output(float_model, inputs)
    assert np.abs(actual - expected).mean() < 0.05
