"""The TupeBackbone of the backbone tests (tiny sizes), its option sets and
inputs, and layer 0 re-implemented in NumPy from the SPEC formulas
(`reference_bias`, `reference_layer0`, with tests/numpy_reference.py)."""

import math

import keras
import numpy as np

import tupe_tf
from tests import numpy_reference as ref
from tests.layers.layer_weights import untied_weights
from tests.sizes import encoder_sizes

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
        # The KERPLE code's parameters: the weights, at least 0.01.
        r1 = np.maximum(np_(layer.scales), 0.01)
        r2 = np.maximum(np_(layer.rates), 0.01)
        bias[0] = ref.kerple_log_bias(r1, r2, n)
    elif option == "fire":
        w = weights_by_path(layer)
        bias[0] = ref.fire_bias(
            abs(w["c"]),
            layer.initial_threshold * abs(w["threshold_multiplier"]),
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
        # Vaswani et al.: the tokens times sqrt(D), plus the fixed table.
        x = math.sqrt(HIDDEN) * x + ref.sinusoidal_table(n, HIDDEN)
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
