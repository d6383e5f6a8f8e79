"""What each positional encoding guarantees, checked on the backbone: the
attention logits and their rank bound, logits that depend only on the
offset (RoPE) or the clipped offset (Shaw), ALiBi's matrix, NoPE's
permutation equivariance, the fixed sinusoidal table and its scaled tokens."""

import math

import keras
import numpy as np
import pytest

import tupe_tf
from tests import numpy_reference as ref
from tests.models.backbone_cases import HEAD_DIM
from tests.models.backbone_cases import HEADS
from tests.models.backbone_cases import HIDDEN
from tests.models.backbone_cases import LAYERS
from tests.models.backbone_cases import MAX_LEN
from tests.models.backbone_cases import make_backbone
from tests.models.backbone_cases import make_inputs
from tests.models.backbone_cases import reference_layer0
from tests.test_case import assert_allclose
from tests.test_case import assert_array_equal
from tests.test_case import randomize
from tests.test_case import to_numpy


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


@pytest.mark.parametrize("option", ["sinusoidal", "bert"])
def test_sinusoidal_input_scales_the_tokens_as_vaswani_et_al(option):
    """`sinusoidal`: the embedding LayerNorm sees `sqrt(D) w + p + s` with
    `w ~ N(0, 1/D)`, so tokens and the unit-amplitude table have norms of
    one order; the tied masked-LM output reads the unscaled `w`. `bert`
    keeps keras-hub's `w + p + s` and its 0.02 initialisation."""
    backbone = make_backbone(position_encoding=option)
    initial = to_numpy(backbone.token_embedding.embeddings).astype("float64")
    scale = math.sqrt(HIDDEN) if option == "sinusoidal" else 1.0
    # TruncatedNormal(0.02) has a standard deviation of about 0.0176.
    expected_std = 1 / math.sqrt(HIDDEN) if option == "sinusoidal" else 0.0176
    assert abs(initial.std() / expected_std - 1) < 0.1
    randomize(backbone, seed=3)
    inputs = make_inputs()
    ids, seg = inputs["token_ids"], inputs["segment_ids"]
    words = to_numpy(backbone.token_embedding.embeddings).astype("float64")
    if option == "sinusoidal":
        positions = ref.sinusoidal_table(ids.shape[1], HIDDEN)
    else:
        positions = to_numpy(backbone.position_embedding.position_embeddings)
        positions = positions[: ids.shape[1]]
    segments = to_numpy(backbone.segment_embedding.embeddings)[seg]
    expected = scale * words[ids] + positions + segments
    probe = keras.Model(backbone.input, backbone.embeddings_layer_norm.input)
    assert_allclose(probe(inputs), expected, rtol=1e-5, atol=1e-5)
    # The masked-LM head is tied to the same, unscaled, matrix.
    masked_lm = tupe_tf.TupeMaskedLM(backbone, preprocessor=None)
    assert masked_lm.masked_lm_head.token_embedding is backbone.token_embedding
    hidden = np.random.default_rng(0).normal(size=(2, HIDDEN))
    tied = backbone.token_embedding(hidden.astype("float32"), reverse=True)
    assert_allclose(tied, hidden @ words.T, rtol=1e-5, atol=1e-5)
