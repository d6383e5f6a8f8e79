"""TupeBackbone against NumPy re-implementations of the SPEC formulas, and
its options, shared bias, parameter counts and refusals."""

import math

import keras
import numpy as np
import pytest
from absl.testing import parameterized

import tupe_tf
from tests.models.backbone_cases import ALL_CONFIGS
from tests.models.backbone_cases import AUTHORS
from tests.models.backbone_cases import HEAD_DIM
from tests.models.backbone_cases import HEADS
from tests.models.backbone_cases import HIDDEN
from tests.models.backbone_cases import LAYERS
from tests.models.backbone_cases import MAX_LEN
from tests.models.backbone_cases import POSITIONAL_BIAS_CONFIGS
from tests.models.backbone_cases import SIZES
from tests.models.backbone_cases import config_id
from tests.models.backbone_cases import make_backbone
from tests.models.backbone_cases import make_inputs
from tests.models.backbone_cases import np_
from tests.models.backbone_cases import reference_bias
from tests.models.backbone_cases import reference_layer0
from tests.models.backbone_cases import shaw_tables
from tests.sizes import encoder_sizes
from tests.test_case import TestCase
from tests.test_case import allclose
from tests.test_case import assert_allclose
from tests.test_case import assert_array_equal
from tests.test_case import gradients
from tests.test_case import randomize
from tests.test_case import to_numpy
from tupe_tf.layers.keras_hub_internals import gelu_approximate
from tupe_tf.models.tupe_backbone import FEEDFORWARD_ACTIVATIONS
from tupe_tf.utils.backbone_options import INTERMEDIATE_ACTIVATIONS


class TupeBackboneTest(TestCase):
    @parameterized.named_parameters(
        (option, option) for option in tupe_tf.POSITION_ENCODINGS
    )
    def test_backbone_basics(self, option):
        inputs = make_inputs(length=6, real=(6, 4))
        self.run_backbone_test(
            cls=tupe_tf.TupeBackbone,
            init_kwargs=dict(
                SIZES,
                position_encoding=option,
                segment_encoding="per-head",
            ),
            input_data=inputs,
            expected_output_shape={
                "sequence_output": (2, 6, HIDDEN),
                "pooled_output": (2, HIDDEN),
            },
            # See tests/test_case.py for why these two are off.
            run_mixed_precision_check=False,
            run_quantization_check=option == "bert",
        )


@pytest.mark.parametrize("options", ALL_CONFIGS, ids=config_id)
def test_layer0_matches_numpy_spec(options):
    backbone = make_backbone(**options)
    randomize(backbone)
    inputs = make_inputs()
    expected_probs, expected_output = reference_layer0(backbone, inputs)

    layer0 = backbone.transformer_layers[0]
    probe = keras.Model(backbone.input, layer0.output)
    output = keras.ops.convert_to_numpy(probe(inputs))
    real = inputs["padding_mask"].astype(bool)
    assert_allclose(output[real], expected_output[real], atol=2e-4, rtol=1e-4)

    # The probabilities themselves, from the layer's attention scores.
    attention = layer0.attention_layer
    captured = {}
    original_call = attention.call

    def capturing_call(*args, **kwargs):
        kwargs["return_attention_scores"] = True
        out, scores = original_call(*args, **kwargs)
        captured["probs"] = keras.ops.convert_to_numpy(scores)
        return out

    attention.call = capturing_call
    try:
        backbone(inputs)
    finally:
        attention.call = original_call
    assert_allclose(captured["probs"], expected_probs, atol=1e-5)


@pytest.mark.parametrize("options", POSITIONAL_BIAS_CONFIGS, ids=config_id)
def test_positional_bias_matches_numpy(options):
    backbone = make_backbone(**options)
    randomize(backbone, seed=3)
    n = 10
    inputs = make_inputs(batch=1, length=n, real=(n,))
    bias = backbone.positional_bias(n)
    assert bias.shape == (LAYERS, HEADS, n, n) and bias.dtype == np.float32
    if backbone.position_encoding == "bert-ad":
        _, (q, k) = reference_bias(backbone, inputs)
        expected = np.einsum("ihd,jhd->hij", q, k) / math.sqrt(4 * HEAD_DIM)
    else:
        expected = reference_bias(backbone, inputs)[0][0]
    if (
        backbone.position_encoding == "diet-rel"
        and backbone.position_bias.units > 1
    ):
        expected = None  # per-layer tables: check every layer below
        table = np_(backbone.position_bias.relative_positions)
        for layer_index in range(LAYERS):
            for i in range(n):
                for j in range(n):
                    assert_allclose(
                        bias[layer_index, :, i, j],
                        np.broadcast_to(
                            table[layer_index, :, j - i + MAX_LEN - 1], (HEADS,)
                        ),
                        atol=1e-6,
                    )
    else:
        assert_allclose(
            bias[0], np.broadcast_to(expected, bias[0].shape), atol=1e-5
        )


def test_cls_reset_structure_and_tied_ablation():
    n = 9
    untied = make_backbone(position_encoding="tupe-a")
    randomize(untied)
    bias = untied.positional_bias(n)[0]  # (H, n, n)
    # [CLS] row: one value per head, [CLS]->[CLS] included.
    assert_allclose(bias[:, 0, :], bias[:, :1, :1].repeat(n, -1)[:, 0])
    # Everyone -> [CLS]: a second value per head, different from the first.
    assert_allclose(bias[:, 1:, 0], np.repeat(bias[:, 1:2, 0], n - 1, axis=1))
    assert not allclose(bias[:, 0, 0], bias[:, 1, 0])
    # The rest is not constant.
    assert np.std(bias[:, 1:, 1:]) > 1e-3

    tied = make_backbone(position_encoding="tupe-a", untie_cls=False)
    randomize(tied)
    tied_bias = tied.positional_bias(n)[0]
    assert tied.position_bias.position_embeddings.shape[0] == MAX_LEN
    assert untied.position_bias.position_embeddings.shape[0] == MAX_LEN + 1
    assert np.std(tied_bias[:, 0, :], axis=-1).min() > 1e-4
    assert np.std(tied_bias[:, 1:, 0], axis=-1).min() > 1e-4


def test_default_epsilon_and_activation_are_keras_hub_berts():
    assert tuple(FEEDFORWARD_ACTIVATIONS) == INTERMEDIATE_ACTIVATIONS
    backbone = make_backbone()
    assert backbone.embeddings_layer_norm.epsilon == 1e-12
    for layer in backbone.transformer_layers:
        assert layer.layer_norm_epsilon == 1e-12
        assert layer.activation is gelu_approximate
    # The positional table's LayerNorm is the reference code's either way.
    assert backbone.position_bias.position_layer_norm.epsilon == 1e-5


@pytest.mark.parametrize("option", ["tupe-a", "bert", "alibi"])
def test_segment_encoding_none_ignores_segment_ids(option):
    backbone = make_backbone(position_encoding=option, segment_encoding="none")
    with_input = make_backbone(position_encoding=option)
    assert backbone.segment_embedding is None
    assert backbone.segment_bias is None
    assert backbone.count_params() == with_input.count_params() - 2 * HIDDEN
    randomize(backbone)
    inputs = make_inputs()
    other = dict(inputs, segment_ids=1 - inputs["segment_ids"])
    assert_array_equal(
        backbone(inputs)["sequence_output"], backbone(other)["sequence_output"]
    )


def test_authors_epsilon_and_activation_change_the_output():
    """Same weights: each of the two settings moves the output (the
    NumPy check of layer 0 covers their values)."""
    inputs = make_inputs()
    options = dict(AUTHORS, position_encoding="tupe-a")
    authors = make_backbone(**options)
    randomize(authors, seed=2)
    expected = to_numpy(authors(inputs)["sequence_output"])
    real = inputs["padding_mask"].astype(bool)
    for changed in (
        dict(layer_norm_epsilon=1e-12),
        dict(intermediate_activation="gelu_approximate"),
    ):
        other = make_backbone(**dict(options, **changed))
        other.set_weights(authors.get_weights())
        difference = np.abs(
            to_numpy(other(inputs)["sequence_output"]) - expected
        )[real].max()
        assert difference > 1e-4, changed


@pytest.mark.parametrize("options", ALL_CONFIGS, ids=config_id)
def test_padding_invariance(options):
    backbone = make_backbone(**options)
    randomize(backbone, seed=5)
    # FIRE's bias depends on the padded length only above its threshold
    # `L = 512 |m|` (its docstring); random `m` may bring `L` below it.
    for variable in backbone.weights:
        if variable.path.endswith("threshold_multiplier"):
            variable.assign(np.ones(variable.shape, "float32"))
    short = make_inputs(length=10, real=(10, 7))
    long = {k: np.pad(v, ((0, 0), (0, 5))) for k, v in short.items()}
    out_short = backbone(short)["sequence_output"]
    out_long = backbone(long)["sequence_output"]
    real = short["padding_mask"].astype(bool)
    assert_allclose(
        to_numpy(out_long)[:, :10][real],
        to_numpy(out_short)[real],
        atol=1e-5,
    )


@pytest.mark.parametrize("options", ALL_CONFIGS, ids=config_id)
def test_gradients_reach_every_positional_parameter(options):
    backbone = make_backbone(**options)
    inputs = make_inputs(length=MAX_LEN, real=(MAX_LEN, MAX_LEN - 3))
    positional = []
    for layer in (
        backbone.position_bias,
        backbone.segment_bias,
        backbone.position_embedding,
        backbone.segment_embedding,
    ):
        if layer is not None:
            positional.extend(layer.trainable_weights)
    positional.extend(shaw_tables(backbone))
    assert positional or options == {"position_encoding": "bert"}
    target = np.random.default_rng(0).normal(size=(2, MAX_LEN, HIDDEN))
    target = keras.ops.convert_to_tensor(target.astype("float32"))
    grads = gradients(
        backbone,
        lambda outputs: keras.ops.sum(outputs["sequence_output"] * target),
        inputs,
        positional,
    )
    for variable, grad in zip(positional, grads):
        assert grad is not None, variable.path
        assert np.abs(grad).max() > 0, variable.path
    if backbone.position_encoding.startswith("tupe") and backbone.untie_cls:
        # Rows 0 and 1 of the table carry theta1 and theta2.
        assert np.abs(grads[0][0]).max() > 0


def count_compute_bias_calls(layer, call):
    """Runs `call()` and counts `layer.compute_bias` calls during it."""
    calls = []
    original = layer.compute_bias

    def counting(length):
        calls.append(length)
        return original(length)

    layer.compute_bias = counting
    try:
        call()
    finally:
        layer.compute_bias = original
    return len(calls)


def test_position_bias_computed_once_and_shared():
    inputs = make_inputs()
    backbone = make_backbone(position_encoding="tupe-r")
    assert (
        count_compute_bias_calls(
            backbone.position_bias, lambda: backbone(inputs)
        )
        == 1
    )
    biases = [
        arguments["attention_bias"]
        for arguments in backbone.layer_attention_arguments
    ]
    assert len(biases) == LAYERS
    assert all(b is biases[0] for b in biases)
    diet = make_backbone(position_encoding="diet-rel")  # per-layer tables
    assert (
        count_compute_bias_calls(diet.position_bias, lambda: diet(inputs)) == 1
    )
    biases = [
        arguments["attention_bias"]
        for arguments in diet.layer_attention_arguments
    ]
    assert biases[0] is not biases[1]


# BERT-base dims, tiny vocabulary: the deltas do not depend on it.
BASE = dict(
    encoder_sizes(768, num_layers=12, num_heads=12, intermediate_dim=3072),
    vocabulary_size=10,
    max_sequence_length=512,
)


@pytest.mark.large
def test_parameter_count_deltas_at_bert_base_dims(monkeypatch):
    # A count does not depend on the initial values: zeros skip drawing
    # 86M truncated normals, most of the time a build takes.
    monkeypatch.setattr(
        keras.initializers.TruncatedNormal,
        "__call__",
        lambda self, shape, dtype=None: keras.ops.zeros(shape, dtype),
    )

    def count(**options):
        model = tupe_tf.TupeBackbone(**BASE, **options)
        params = model.count_params()
        del model
        keras.backend.clear_session()
        return params

    bert = count(position_encoding="bert")
    tupe_a = count(position_encoding="tupe-a")
    assert abs((tupe_a - bert) - 2 * 768 * 768) < 10_000
    assert abs((tupe_a - bert) - 1.18e6) < 0.01e6
    tupe_r = count(position_encoding="tupe-r")
    assert tupe_r - tupe_a == 32 * 12
    assert (
        count(position_encoding="diet-abs", position_rank=128) - bert
        == 1_179_648
    )
    assert (
        count(
            position_encoding="diet-abs",
            position_rank=128,
            position_sharing="none",
        )
        - bert
        == 18_481_152
    )
    assert count(position_encoding="diet-rel") - bert == -245_904
    # RoPE and ALiBi have no parameters: only the input table goes.
    assert count(position_encoding="rope") - bert == -512 * 768
    assert count(position_encoding="alibi") - bert == -512 * 768
    assert count(position_encoding="sinusoidal") - bert == -512 * 768
    assert count(position_encoding="nope") - bert == -512 * 768
    # KERPLE: r1, r2 per head; FIRE: c, L and the MLP 2 -> 32 -> 12.
    assert count(position_encoding="kerple-log") - bert == -512 * 768 + 2 * 12
    fire = 2 + (2 * 32 + 32) + (32 * 12 + 12)
    assert count(position_encoding="fire") - bert == -512 * 768 + fire
    # Shaw et al.: 2k + 1 = 257 key vectors of the head size per layer.
    shaw = 12 * 257 * 64
    assert count(position_encoding="shaw") - bert == -512 * 768 + shaw
    reference = count(position_encoding="tupe-r", cls_relative="reference")
    assert reference - tupe_r == 12


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(position_encoding="tupe"), "position_encoding.*bert-r"),
        (dict(segment_encoding="head"), "segment_encoding.*per-head"),
        (
            dict(intermediate_activation="relu"),
            r"`intermediate_activation` must be one of "
            r"\('gelu_approximate', 'gelu'\)\. Received: "
            r"intermediate_activation='relu'",
        ),
        (dict(layer_norm_epsilon=0.0), "`layer_norm_epsilon` must be > 0"),
        (
            dict(position_encoding="diet-abs", position_sharing="all"),
            "position_sharing.*head-wise",
        ),
        (
            dict(position_encoding="tupe-r", position_sharing="none"),
            "position_sharing",
        ),
        (dict(position_encoding="bert", position_rank=8), "position_rank"),
        (dict(position_encoding="diet-rel", untie_cls=False), "untie_cls"),
        (
            dict(position_encoding="bert-r", relative_buckets=7),
            "relative_buckets",
        ),
        (dict(num_heads=5), "divisible"),
        (
            dict(position_encoding="rope", rope_max_wavelength=0),
            "rope_max_wavelength must be a positive|rope_max_wavelength",
        ),
        (
            dict(position_encoding="rope", rope_max_wavelength=-1.0),
            "`rope_max_wavelength` must be > 0",
        ),
        (
            dict(position_encoding="tupe-r", rope_max_wavelength=500.0),
            r"`rope_max_wavelength` only applies to \['rope'\]",
        ),
        (
            dict(position_encoding="tupe-a", cls_relative="reference"),
            r"`cls_relative` only applies to \['tupe-r'\]",
        ),
        (
            dict(position_encoding="tupe-r", cls_relative="paper"),
            "cls_relative.*reference",
        ),
        (
            dict(
                position_encoding="tupe-r",
                cls_relative="reference",
                untie_cls=False,
            ),
            "untie_cls",
        ),
        (
            dict(position_encoding="alibi", position_sharing="none"),
            "position_sharing",
        ),
        (
            dict(position_encoding="rope", hidden_dim=24, num_heads=8),
            "even",
        ),
        (
            dict(position_encoding="shaw", shaw_max_distance=0),
            "`shaw_max_distance` must be >= 1",
        ),
        (
            dict(position_encoding="bert", shaw_max_distance=8),
            r"`shaw_max_distance` only applies to \['shaw'\]",
        ),
    ],
)
def test_bad_options_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        tupe_tf.TupeBackbone(**dict(SIZES, **kwargs))


@pytest.mark.parametrize(
    "option", ["bert", "tupe-r", "diet-rel", "sinusoidal", "nope"]
)
def test_too_long_batch_is_refused_clearly(option):
    backbone = make_backbone(position_encoding=option)
    inputs = make_inputs(length=MAX_LEN + 4, real=(MAX_LEN + 4, 3))
    with pytest.raises(ValueError, match="max_sequence_length=16"):
        backbone(inputs)
