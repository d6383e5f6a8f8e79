"""TupeBackbone against NumPy re-implementations of the SPEC formulas."""

import math

import keras
import keras_hub
import numpy as np
import pytest
from absl.testing import parameterized
from keras.backend import standardize_dtype

import tupe_tf
from tests import numpy_reference as ref
from tests.layers.layer_weights import untied_weights
from tests.sizes import encoder_sizes
from tests.test_case import TestCase
from tests.test_case import allclose
from tests.test_case import assert_allclose
from tests.test_case import assert_array_equal
from tests.test_case import gradients
from tests.test_case import jit_compiled
from tests.test_case import randomize
from tests.test_case import tensorflow_only
from tests.test_case import to_numpy
from tupe_tf.layers.keras_hub_internals import gelu_approximate
from tupe_tf.models.tupe_backbone import FEEDFORWARD_ACTIVATIONS
from tupe_tf.utils.backbone_options import INTERMEDIATE_ACTIVATIONS

VOCAB, LAYERS, HEADS, HIDDEN, FFN, MAX_LEN = 97, 2, 4, 32, 64, 16
HEAD_DIM = HIDDEN // HEADS
SIZES = dict(
    encoder_sizes(HIDDEN, num_layers=LAYERS, num_heads=HEADS),
    vocabulary_size=VOCAB,
    max_sequence_length=MAX_LEN,
)
# The TUPE authors' whole-model settings (SPEC "The authors' whole model").
AUTHORS = dict(
    layer_norm_epsilon=1e-5,
    intermediate_activation="gelu",
    segment_encoding="none",
)

ALL_CONFIGS = [
    dict(position_encoding="bert"),
    dict(position_encoding="bert-r"),
    dict(position_encoding="tupe-a"),
    dict(position_encoding="tupe-a", untie_cls=False),
    dict(position_encoding="tupe-r"),
    dict(position_encoding="tupe-r", untie_cls=False),
    dict(position_encoding="bert-ad"),
    dict(position_encoding="diet-abs"),
    dict(position_encoding="diet-abs", position_sharing="head-wise"),
    dict(
        position_encoding="diet-abs", position_sharing="none", position_rank=3
    ),
    dict(position_encoding="diet-rel"),
    dict(position_encoding="diet-rel", position_sharing="layer-wise"),
    dict(position_encoding="diet-rel", position_sharing="head-wise"),
    dict(position_encoding="tupe-r", segment_encoding="per-head"),
    dict(position_encoding="diet-abs", segment_encoding="per-head"),
    dict(
        position_encoding="diet-rel",
        segment_encoding="per-head",
        position_sharing="none",
    ),
    dict(position_encoding="bert", segment_encoding="per-head"),
    dict(position_encoding="rope"),
    dict(position_encoding="rope", rope_max_wavelength=100.0),
    dict(position_encoding="alibi"),
    dict(position_encoding="alibi", segment_encoding="per-head"),
    dict(position_encoding="rope", segment_encoding="per-head"),
    dict(position_encoding="tupe-r", cls_relative="reference"),
    dict(position_encoding="tupe-r", cls_relative="reference", **AUTHORS),
    dict(position_encoding="tupe-a", **AUTHORS),
    dict(position_encoding="sinusoidal"),
    dict(position_encoding="nope"),
    dict(position_encoding="kerple-log"),
    dict(position_encoding="fire"),
    dict(position_encoding="fire", segment_encoding="per-head"),
    dict(position_encoding="shaw"),
    # Distances past 3 share the table's last vectors at these lengths.
    dict(position_encoding="shaw", shaw_max_distance=3),
    dict(position_encoding="shaw", segment_encoding="per-head"),
]
NEW_ENCODINGS = ["sinusoidal", "nope", "kerple-log", "fire"]
# One of each kind of content-free part, per-layer tables included.
POSITIONAL_BIAS_CONFIGS = (
    ALL_CONFIGS[:13]
    + [
        dict(position_encoding="rope"),
        dict(position_encoding="alibi"),
        dict(position_encoding="tupe-r", cls_relative="reference"),
    ]
    + [dict(position_encoding=option) for option in NEW_ENCODINGS]
)


def config_id(config):
    return "-".join(f"{v}" for v in config.values())


def make_backbone(dtype=None, **options):
    return tupe_tf.TupeBackbone(
        **SIZES,
        dropout=0.1,
        dtype=dtype,
        **options,
    )


def make_inputs(batch=2, length=12, real=(12, 9), seed=0):
    rng = np.random.default_rng(seed)
    token_ids = rng.integers(5, VOCAB, size=(batch, length)).astype("int32")
    padding_mask = np.zeros((batch, length), "int32")
    segment_ids = np.zeros((batch, length), "int32")
    for b, n in enumerate(real):
        padding_mask[b, :n] = 1
        segment_ids[b, n // 2 : n] = 1
    token_ids = token_ids * padding_mask
    return {
        "token_ids": token_ids,
        "segment_ids": segment_ids,
        "padding_mask": padding_mask,
    }


def np_(variable):
    return keras.ops.convert_to_numpy(variable).astype("float64")


def shaw_tables(backbone):
    """Each layer's `query_logits` table (Shaw et al.'s relative keys)."""
    return [
        layer.query_logits.relative_keys
        for layer in backbone.transformer_layers
        if layer.query_logits is not None
    ]


def weights_by_path(layer):
    """A layer's weights as float64 arrays, keyed by their path below it."""
    return {
        variable.path.split("/", 1)[1]: np_(variable)
        for variable in layer.weights
    }


def reference_bias(backbone, inputs):
    """beta `(1|B, H, n, n)` for layer 0 and the query/key offsets."""
    n = inputs["token_ids"].shape[1]
    option = backbone.position_encoding
    bias = np.zeros((1, HEADS, n, n))
    offsets = (None, None)
    layer = backbone.position_bias
    if option == "bert-r":
        table = np_(layer.relative_attention_bias)
        for i in range(n):
            for j in range(n):
                bias[0, :, i, j] = table[ref.t5_bucket(j - i)]
    elif option in ("tupe-a", "tupe-r", "bert-ad"):
        weights = untied_weights(layer)
        if option == "bert-ad":
            # LN_p's epsilon is the TUPE reference code's 1e-5.
            offsets = ref.untied_offsets(weights, n, HEADS, epsilon=1e-5)
        elif backbone.cls_relative == "reference":
            relative = np_(layer.relative_position_bias.relative_attention_bias)
            bias[0] = ref.tupe_reference_layout_bias(
                weights, n, HEADS, relative
            )
        else:
            relative = (
                np_(layer.relative_position_bias.relative_attention_bias)
                if option == "tupe-r"
                else None
            )
            bias[0] = ref.tupe_bias(
                weights, n, HEADS, backbone.untie_cls, relative
            )
    elif option == "alibi":
        bias[0] = ref.alibi_bias(HEADS, n)
    elif option == "kerple-log":
        r1 = ref.softplus_positive(np_(layer.raw_scales))
        r2 = ref.softplus_positive(np_(layer.raw_rates))
        bias[0] = ref.kerple_log_bias(r1, r2, n)
    elif option == "fire":
        w = weights_by_path(layer)
        bias[0] = ref.fire_bias(
            ref.softplus_positive(w["raw_c"]),
            layer.initial_threshold * ref.softplus_positive(w["raw_threshold"]),
            w["hidden_kernel"],
            w["hidden_bias"],
            w["output_kernel"],
            w["output_bias"],
            n,
        )
    elif option == "diet-abs":
        pq, pk = np_(layer.query_positions), np_(layer.key_positions)
        bias[0] = pq[0, :, :n] @ np.swapaxes(pk[0, :, :n], -1, -2)
    elif option == "diet-rel":
        table = np_(layer.relative_positions)[0]  # layer 0's table
        for i in range(n):
            for j in range(n):
                bias[0, :, i, j] = table[:, j - i + MAX_LEN - 1]
    if backbone.segment_encoding == "per-head":
        pairs = np_(backbone.segment_bias.segment_pairs)[0]  # (H', S, S)
        seg = inputs["segment_ids"]
        bias = bias + pairs[:, seg[:, :, None], seg[:, None, :]].transpose(
            1, 0, 2, 3
        )
    return bias, offsets


def reference_layer0(backbone, inputs):
    """Layer-0 attention probabilities and output, all in NumPy."""
    ids, seg = inputs["token_ids"], inputs["segment_ids"]
    n = ids.shape[1]
    x = np_(backbone.token_embedding.embeddings)[ids]
    if backbone.position_encoding == "sinusoidal":
        x = x + ref.sinusoidal_table(n, HIDDEN)
    elif backbone.position_embedding is not None:
        x = x + np_(backbone.position_embedding.position_embeddings)[:n]
    if backbone.segment_embedding is not None:
        x = x + np_(backbone.segment_embedding.embeddings)[seg]
    epsilon = backbone.layer_norm_epsilon
    gelu = {"gelu": ref.gelu_erf, "gelu_approximate": ref.gelu_tanh}[
        backbone.intermediate_activation
    ]
    x = ref.layer_norm(
        x,
        np_(backbone.embeddings_layer_norm.gamma),
        np_(backbone.embeddings_layer_norm.beta),
        epsilon,
    )
    option = backbone.position_encoding
    scale = {
        "tupe-a": 1 / math.sqrt(2 * HEAD_DIM),
        "tupe-r": 1 / math.sqrt(2 * HEAD_DIM),
        "bert-ad": 1 / math.sqrt(4 * HEAD_DIM),
    }.get(option, 1 / math.sqrt(HEAD_DIM))
    bias, (query_offset, key_offset) = reference_bias(backbone, inputs)
    w = weights_by_path(backbone.transformer_layers[0])
    probs = ref.attention_probabilities(
        x,
        w["self_attention_layer/query/kernel"],
        w["self_attention_layer/query/bias"],
        w["self_attention_layer/key/kernel"],
        w["self_attention_layer/key/bias"],
        scale,
        bias,
        inputs["padding_mask"],
        query_offset,
        key_offset,
        backbone.rope_max_wavelength if option == "rope" else None,
        np_(shaw_tables(backbone)[0]) if option == "shaw" else None,
    )
    value = np.einsum(
        "bnd,dhk->bnhk", x, w["self_attention_layer/value/kernel"]
    )
    value = value + w["self_attention_layer/value/bias"]
    context = np.einsum("bhqs,bshk->bqhk", probs, value)
    out = np.einsum(
        "bqhk,hkd->bqd",
        context,
        w["self_attention_layer/attention_output/kernel"],
    )
    out = out + w["self_attention_layer/attention_output/bias"]
    x = ref.layer_norm(
        out + x,
        w["self_attention_layer_norm/gamma"],
        w["self_attention_layer_norm/beta"],
        epsilon,
    )
    hidden = gelu(
        x @ w["feedforward_intermediate_dense/kernel"]
        + w["feedforward_intermediate_dense/bias"]
    )
    ffn = (
        hidden @ w["feedforward_output_dense/kernel"]
        + w["feedforward_output_dense/bias"]
    )
    x = ref.layer_norm(
        ffn + x,
        w["feedforward_layer_norm/gamma"],
        w["feedforward_layer_norm/beta"],
        epsilon,
    )
    return probs, x


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


def test_bert_option_equals_keras_hub_bert_with_copied_weights():
    bert = keras_hub.models.BertBackbone(**SIZES)
    randomize(bert, seed=7)
    backbone = make_backbone(position_encoding="bert")
    new_variables = tupe_tf.load_bert_weights(backbone, bert)
    assert new_variables == []
    inputs = make_inputs()
    expected = bert(inputs)
    actual = backbone(inputs)
    for key in ("sequence_output", "pooled_output"):
        assert_allclose(actual[key], expected[key], atol=1e-5)

    # Warm-starting TUPE-R: everything but the positional parameters copies.
    tupe = make_backbone(position_encoding="tupe-r")
    new_variables = tupe_tf.load_bert_weights(tupe, bert)
    new_paths = {v.path.split("/")[0] for v in new_variables}
    assert new_paths == {"untied_position_bias"}
    assert_allclose(
        tupe.transformer_layers[1].weights[0],
        bert.transformer_layers[1].weights[0],
    )


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


def test_load_bert_weights_refuses_other_dims():
    bert = keras_hub.models.BertBackbone(
        **dict(SIZES, intermediate_dim=2 * FFN)
    )
    with pytest.raises(ValueError, match="intermediate_dim"):
        tupe_tf.load_bert_weights(make_backbone(position_encoding="bert"), bert)


@pytest.mark.parametrize("options", ALL_CONFIGS, ids=config_id)
def test_padding_invariance(options):
    backbone = make_backbone(**options)
    randomize(backbone, seed=5)
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


@tensorflow_only("a graph with a dynamic length")
@pytest.mark.parametrize(
    "option", ["bert", "tupe-r", "diet-rel", "sinusoidal", "nope"]
)
def test_too_long_dynamic_batch_is_refused_in_the_graph(option):
    import tensorflow as tf

    backbone = make_backbone(position_encoding=option)
    inputs = make_inputs(length=MAX_LEN + 4, real=(MAX_LEN + 4, 3))

    @tf.function(
        input_signature=[
            {k: tf.TensorSpec([None, None], tf.int32) for k in inputs}
        ]
    )
    def dynamic(batch):
        return backbone(batch)["sequence_output"]

    with pytest.raises(
        tf.errors.InvalidArgumentError, match="max_sequence_length=16"
    ):
        dynamic(inputs)
    # In-range dynamic lengths still work.
    assert dynamic(make_inputs(length=11, real=(11, 4))).shape == (
        2,
        11,
        HIDDEN,
    )


@pytest.mark.parametrize("option", tupe_tf.POSITION_ENCODINGS)
def test_variable_lengths_xla_and_fold(option):
    backbone = make_backbone(
        position_encoding=option, segment_encoding="per-head"
    )
    randomize(backbone, seed=2)
    compiled = jit_compiled(lambda batch: backbone(batch)["sequence_output"])
    for length in (5, 12, MAX_LEN):
        inputs = make_inputs(length=length, real=(length, length - 2))
        eager = to_numpy(backbone(inputs)["sequence_output"])
        assert_allclose(compiled(inputs), eager, atol=1e-5)
        backbone.fold_positional_bias([length])
        assert_allclose(backbone(inputs)["sequence_output"], eager, atol=1e-5)
        backbone.unfold_positional_bias()


@pytest.mark.skipif(
    keras.backend.backend() != "torch", reason="torch.compile is PyTorch's"
)
def test_torch_compile_predicts_as_eager():
    """`jit_compile=True` on PyTorch is `torch.compile`. It takes most of a
    minute per model on CPU, so one option: the one with most parts
    (untied positions, relative buckets, per-head segments)."""
    import torch

    backbone = make_backbone(
        position_encoding="tupe-r", segment_encoding="per-head"
    )
    randomize(backbone, seed=3)
    inputs = make_inputs(length=12, real=(12, 9))
    eager = to_numpy(backbone(inputs)["sequence_output"])
    backbone.compile(jit_compile=True)
    torch._dynamo.utils.counters.clear()
    compiled = backbone.predict(inputs, verbose=0)["sequence_output"]
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] > 0
    assert_allclose(compiled, eager, atol=1e-5)


@pytest.mark.parametrize("option", tupe_tf.POSITION_ENCODINGS)
def test_mixed_bfloat16(option):
    float_model = make_backbone(position_encoding=option)
    randomize(float_model, seed=4)
    mixed = make_backbone(position_encoding=option, dtype="mixed_bfloat16")
    mixed.set_weights(float_model.get_weights())
    positional = mixed.position_bias
    if option == "sinusoidal":  # the input table
        positional = mixed.position_embedding
    if positional is not None:  # the float32 positional part (SPEC)
        assert positional.compute_dtype == "float32"
    if mixed.position_bias is not None:
        bias = mixed.position_bias(np.zeros((1, 12), "int32"))
        assert standardize_dtype(bias.dtype) == "float32"
    assert mixed.transformer_layers[0].compute_dtype == "bfloat16"
    for table in shaw_tables(mixed):  # computes in bfloat16, like q.k
        assert standardize_dtype(table.dtype) == "float32"
        assert mixed.transformer_layers[0].query_logits.compute_dtype == (
            "bfloat16"
        )
    inputs = make_inputs()
    expected = to_numpy(float_model(inputs)["sequence_output"])
    actual = mixed(inputs)["sequence_output"]
    assert standardize_dtype(actual.dtype) == "bfloat16"
    actual = to_numpy(keras.ops.cast(actual, "float32"))
    assert np.isfinite(actual).all()
    # bf16 has ~3 significant digits; outputs are LayerNorm-scaled.
    assert np.abs(actual - expected).mean() < 0.05


@pytest.mark.parametrize("option", tupe_tf.POSITION_ENCODINGS)
def test_compiled_masked_lm_train_step(option):
    """Keras' compiled train step (XLA on TensorFlow and JAX, keras-hub's
    default `jit_compile="auto"`) updates the positional weights."""
    backbone = make_backbone(position_encoding=option)
    mlm = keras_hub.models.BertMaskedLM(backbone, preprocessor=None)
    mlm.compile(
        optimizer=keras.optimizers.SGD(0.1),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    inputs = make_inputs()
    inputs["mask_positions"] = np.array([[1, 2], [3, 4]], "int32")
    labels = np.array([[5, 6], [7, 8]], "int32")
    positional = shaw_tables(backbone)
    if backbone.position_bias is not None:
        positional += backbone.position_bias.trainable_weights
    before = to_numpy(positional)
    logs = mlm.train_on_batch(inputs, labels, return_dict=True)
    assert np.isfinite(logs["loss"])
    after = to_numpy(positional)
    if before:
        assert not all(map(np.array_equal, before, after))


@pytest.mark.large
def test_mixed_bfloat16_trains_through_xla():
    """One option: XLA compiles are slow on CPU."""
    mixed = make_backbone(position_encoding="tupe-r", dtype="mixed_bfloat16")
    randomize(mixed, seed=4)
    inputs = make_inputs()
    mlm = keras_hub.models.BertMaskedLM(mixed, preprocessor=None)
    mlm.compile(
        optimizer="adam",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=True,
    )
    x = {**inputs, "mask_positions": np.array([[1, 2], [3, 4]], "int32")}
    history = mlm.fit(x, np.array([[5, 6], [7, 8]]), epochs=2, verbose=0)
    assert np.isfinite(history.history["loss"]).all()


@pytest.mark.parametrize(
    "option",
    ["bert", "tupe-a", "bert-ad", "diet-rel", "rope", "alibi", "kerple-log"],
)
def test_attention_logits_and_rank_bound(option):
    backbone = make_backbone(position_encoding=option)
    randomize(backbone, seed=9)
    inputs = make_inputs(batch=1, length=MAX_LEN, real=(MAX_LEN,))
    with_bias = backbone.attention_logits(inputs)
    content = backbone.attention_logits(inputs, include_bias=False)
    assert len(with_bias) == LAYERS and with_bias[0].shape == (1, HEADS, 16, 16)
    # Softmax of the logits is the layer's attention (no padding here).
    expected_probs, _ = reference_layer0(backbone, inputs)
    assert_allclose(
        ref.softmax(with_bias[0].astype("float64")), expected_probs, atol=1e-5
    )
    # Without the per-head bias the rank is bounded by the head size.
    ranks = [
        np.linalg.matrix_rank(m.astype("float64"), tol=1e-4 * np.abs(m).max())
        for m in content[1][0]
    ]
    assert max(ranks) <= HEAD_DIM + (1 if option == "bert-ad" else 0)
    if option in ("tupe-a", "diet-rel", "alibi", "kerple-log"):
        full = [
            np.linalg.matrix_rank(
                m.astype("float64"), tol=1e-4 * np.abs(m).max()
            )
            for m in with_bias[1][0]
        ]
        assert min(full) > HEAD_DIM


def logits_of_one_repeated_token(backbone):
    """Layer 0's logits `(H, n, n)` on one sequence of `MAX_LEN` copies of
    one token in one segment."""
    inputs = {
        "token_ids": np.full((1, MAX_LEN), 7, "int32"),
        "segment_ids": np.zeros((1, MAX_LEN), "int32"),
        "padding_mask": np.ones((1, MAX_LEN), "int32"),
    }
    return backbone.attention_logits(inputs)[0][0]


def test_rope_logits_depend_only_on_the_offset():
    """Same token and segment everywhere: layer 0's input is the same
    vector at every position, so with RoPE its logits are Toeplitz
    (depend only on j - i); shifting both positions changes nothing."""
    backbone = make_backbone(position_encoding="rope")
    randomize(backbone, seed=11)
    logits = logits_of_one_repeated_token(backbone)
    for shift in (1, 3, 7):
        assert_allclose(
            logits[:, shift:, shift:], logits[:, :-shift, :-shift], atol=1e-4
        )
    assert np.std(logits[:, 0, :]) > 1e-3  # positions do matter
    assert_array_equal(
        backbone.positional_bias(MAX_LEN), np.zeros((LAYERS, HEADS, 16, 16))
    )


def test_shaw_logits_depend_only_on_the_clipped_offset():
    """Same token and segment everywhere: q_i and k_j are the same at every
    position, so Shaw's logits depend only on j - i, and past
    `shaw_max_distance` not even on that; there is no content-free bias."""
    backbone = make_backbone(position_encoding="shaw", shaw_max_distance=3)
    randomize(backbone, seed=12)
    logits = logits_of_one_repeated_token(backbone)
    for shift in (1, 5):
        assert_allclose(
            logits[:, shift:, shift:], logits[:, :-shift, :-shift], atol=1e-4
        )
    row = logits[:, 8]  # query 8: keys 0..5 and 11..15 share edge vectors
    assert_allclose(row[:, :6], row[:, 5:6].repeat(6, -1), atol=1e-5)
    assert_allclose(row[:, 11:], row[:, 11:12].repeat(5, -1), atol=1e-5)
    assert np.abs(np.diff(row[:, 5:12], axis=-1)).min() > 1e-4
    assert_array_equal(
        backbone.positional_bias(MAX_LEN), np.zeros((LAYERS, HEADS, 16, 16))
    )


def test_alibi_positional_bias_is_the_alibi_matrix_for_every_layer():
    backbone = make_backbone(position_encoding="alibi")
    bias = backbone.positional_bias(11)
    for layer_index in range(LAYERS):
        assert_allclose(bias[layer_index], ref.alibi_bias(HEADS, 11), atol=1e-6)
    assert backbone.position_bias.weights == []


def test_nope_is_permutation_equivariant():
    """Without positions, permuting the tokens with their segments and mask
    permutes the outputs (dropout off: inference)."""
    backbone = make_backbone(position_encoding="nope")
    randomize(backbone, seed=6)
    inputs = make_inputs(length=12, real=(12, 9))
    order = np.random.default_rng(1).permutation(12)
    permuted = {name: value[:, order] for name, value in inputs.items()}
    out = to_numpy(backbone(inputs)["sequence_output"])
    out_permuted = to_numpy(backbone(permuted)["sequence_output"])
    assert_allclose(out_permuted, out[:, order], atol=1e-5)
    # Positions break it: the same check fails with ALiBi.
    alibi = make_backbone(position_encoding="alibi")
    randomize(alibi, seed=6)
    out = to_numpy(alibi(inputs)["sequence_output"])
    out_permuted = to_numpy(alibi(permuted)["sequence_output"])
    assert np.abs(out_permuted - out[:, order]).max() > 1e-2


def test_sinusoidal_table_is_the_spec_formula_and_fixed():
    backbone = make_backbone(position_encoding="sinusoidal")
    assert backbone.position_embedding.weights == []
    assert backbone.position_bias is None
    tokens = np.zeros((1, MAX_LEN, HIDDEN), "float32")
    table = to_numpy(backbone.position_embedding(tokens))[0]
    assert_allclose(table, ref.sinusoidal_table(MAX_LEN, HIDDEN), atol=1e-6)


def test_load_bert_weights_into_shaw_leaves_only_its_tables_new():
    bert = keras_hub.models.BertBackbone(
        vocabulary_size=VOCAB,
        num_layers=LAYERS,
        num_heads=HEADS,
        hidden_dim=HIDDEN,
        intermediate_dim=FFN,
        max_sequence_length=MAX_LEN,
    )
    randomize(bert, seed=8)
    backbone = make_backbone(position_encoding="shaw")
    new_variables = tupe_tf.load_bert_weights(backbone, bert)
    assert [id(v) for v in new_variables] == [
        id(v) for v in shaw_tables(backbone)
    ]
    for ours, theirs in zip(
        backbone.transformer_layers, bert.transformer_layers
    ):
        query_kernel = theirs.weights[0]
        assert query_kernel.path.endswith("self_attention_layer/query/kernel")
        assert_allclose(ours.attention_layer.query_dense.kernel, query_kernel)
        assert_allclose(
            ours.get_weights()[-1], theirs.get_weights()[-1], atol=0
        )


def test_load_bert_weights_into_sinusoidal_skips_the_fixed_table():
    bert = keras_hub.models.BertBackbone(
        **dict(SIZES, max_sequence_length=2 * MAX_LEN)
    )
    backbone = make_backbone(position_encoding="sinusoidal")
    assert tupe_tf.load_bert_weights(backbone, bert) == []
    assert_array_equal(
        backbone.token_embedding.embeddings, bert.token_embedding.embeddings
    )
