"""Loading weights of the TUPE authors' fairseq BERT (guolinke/TUPE)."""

import numpy as np

from tupe_tf.models.tupe_backbone import TupeBackbone

_MARKERS = ("sentence_encoder.", "lm_head.")


def _dense(prefix):
    """A torch `Linear` -> keras `Dense` (kernel transposed)."""
    return [
        (f"{prefix}.weight", lambda w: w.T),
        (f"{prefix}.bias", None),
    ]


def _layer_norm(prefix):
    return [(f"{prefix}.weight", None), (f"{prefix}.bias", None)]


def _attention_projection(layer_prefix, index, heads):
    """Query (0), key (1) or value (2) of the fused `in_proj`, as keras
    `MultiHeadAttention`'s `(D, heads, d)` kernel and `(heads, d)` bias."""

    def rows(w):
        return np.split(w, 3, axis=0)[index]

    def kernel(w):
        w = rows(w).T
        return w.reshape(w.shape[0], heads, -1)

    return [
        (f"{layer_prefix}.self_attn.in_proj_weight", kernel),
        (
            f"{layer_prefix}.self_attn.in_proj_bias",
            lambda b: rows(b).reshape(heads, -1),
        ),
    ]


def _variables(layer, names):
    """`layer`'s variables at the paths `names` (relative to the layer,
    e.g. `self_attention_layer/query/kernel`), in that order."""
    by_path = {variable.path: variable for variable in layer.weights}
    found = []
    for name in names:
        path = f"{layer.path}/{name}"
        if path not in by_path:
            raise ValueError(
                f"`{layer.name}` has no variable `{path}`; it has "
                f"{sorted(by_path)}."
            )
        found.append(by_path[path])
    return found


def _kernel_and_bias(sublayer):
    return [f"{sublayer}/kernel", f"{sublayer}/bias"]


def _gamma_and_beta(sublayer):
    return [f"{sublayer}/gamma", f"{sublayer}/beta"]


def _encoder_layer(layer, prefix, heads):
    def output_kernel(w):
        return w.T.reshape(heads, -1, w.shape[0])

    # keras-hub's `TransformerEncoder` names (the paths of its variables).
    attention = "self_attention_layer"
    sources = [
        *_attention_projection(prefix, 0, heads),
        *_attention_projection(prefix, 1, heads),
        *_attention_projection(prefix, 2, heads),
        (f"{prefix}.self_attn.out_proj.weight", output_kernel),
        (f"{prefix}.self_attn.out_proj.bias", None),
        *_layer_norm(f"{prefix}.self_attn_layer_norm"),
        *_dense(f"{prefix}.fc1"),
        *_dense(f"{prefix}.fc2"),
        *_layer_norm(f"{prefix}.final_layer_norm"),
    ]
    names = [
        *_kernel_and_bias(f"{attention}/query"),
        *_kernel_and_bias(f"{attention}/key"),
        *_kernel_and_bias(f"{attention}/value"),
        *_kernel_and_bias(f"{attention}/attention_output"),
        *_gamma_and_beta("self_attention_layer_norm"),
        *_kernel_and_bias("feedforward_intermediate_dense"),
        *_kernel_and_bias("feedforward_output_dense"),
        *_gamma_and_beta("feedforward_layer_norm"),
    ]
    return list(zip(_variables(layer, names), sources))


def _backbone_pairs(backbone):
    """`(variable, (name, transform))` for every backbone weight."""
    encoder = "sentence_encoder"
    positions = backbone.position_bias
    pairs = [
        (
            backbone.token_embedding.embeddings,
            (f"{encoder}.embed_tokens.weight", None),
        ),
        *zip(
            backbone.embeddings_layer_norm.weights,
            _layer_norm(f"{encoder}.emb_layer_norm"),
        ),
        (positions.position_embeddings, (f"{encoder}.pos.weight", None)),
        *zip(
            positions.position_layer_norm.weights,
            _layer_norm(f"{encoder}.pos_ln"),
        ),
        *zip(
            positions.query_projection.weights,
            _dense(f"{encoder}.pos_q_linear"),
        ),
        *zip(
            positions.key_projection.weights, _dense(f"{encoder}.pos_k_linear")
        ),
    ]
    if positions.relative_position_bias is not None:
        pairs.append(
            (
                positions.relative_position_bias.relative_attention_bias,
                (f"{encoder}.relative_attention_bias.weight", None),
            )
        )
    for index, layer in enumerate(backbone.transformer_layers):
        pairs.extend(
            _encoder_layer(
                layer, f"{encoder}.layers.{index}", backbone.num_heads
            )
        )
    return pairs


def _head_pairs(head):
    # keras-hub's `MaskedLMHead` names (the paths of its variables).
    names = [
        *_kernel_and_bias("intermediate_dense"),
        *_gamma_and_beta("intermediate_layer_norm"),
        "output_bias",
    ]
    sources = [
        *_dense("lm_head.dense"),
        *_layer_norm("lm_head.layer_norm"),
        ("lm_head.bias", None),
    ]
    return list(zip(_variables(head, names), sources))


def _check_backbone(backbone):
    expected = dict(untie_cls=True, segment_encoding="none")
    if backbone.position_encoding == "tupe-r":
        expected["cls_relative"] = "reference"
    elif backbone.position_encoding != "tupe-a":
        expected["position_encoding"] = "tupe-a or tupe-r"
    for name, value in expected.items():
        if getattr(backbone, name) != value:
            raise ValueError(
                f"The TUPE authors' weights need `{name}={value!r}`. "
                f"Received: {name}={getattr(backbone, name)!r}"
            )


def _by_short_name(state_dict, with_head):
    """Keys from `sentence_encoder.` (and `lm_head.`) on, arrays as NumPy.

    A fairseq checkpoint's `decoder.sentence_encoder.*` and a bare
    `BertEncoder`'s `sentence_encoder.*` both work.
    """
    arrays = {}
    for key, value in state_dict.items():
        for marker in _MARKERS[: 2 if with_head else 1]:
            start = key.find(marker)
            if start >= 0:
                arrays[key[start:]] = np.asarray(value, dtype="float32")
    return arrays


def load_tupe_reference_weights(model, state_dict):
    """Copies the TUPE authors' fairseq BERT weights into a tupe-tf model.

    Their `BertEncoder` (guolinke/TUPE, `fairseq/models/bert/model.py`, with
    `fairseq/modules/transformer_sentence_encoder.py`) maps one to one on a
    `TupeBackbone` with `position_encoding="tupe-r"` and
    `cls_relative="reference"` (their `--rel-pos`) or `"tupe-a"`, and
    `segment_encoding="none"`. To compute their model, build it also with
    `layer_norm_epsilon=1e-5` and `intermediate_activation="gelu"` (see
    docs/spec.md, "The authors' whole model"). Their fused `in_proj` is split
    into query, key and value; torch `Linear` weights are transposed. The
    pooler (`pooled_dense`), which their encoder does not have, is left as
    it is.

    Args:
        model: a `TupeBackbone`, or a `TupeMaskedLM` (then their `lm_head`
            fills the MLM head; its output weight must be the tied token
            embedding, as in their code).
        state_dict: mapping of their parameter names (a prefix before
            `sentence_encoder.` / `lm_head.`, e.g. `decoder.`, is allowed) to
            arrays (NumPy, or anything `np.asarray` takes).

    Raises:
        ValueError: a backbone setting their model does not have, a missing
            or unused weight, or a shape that differs.

    Example:
    ```python
    state = torch.load("checkpoint_best.pt")["model"]
    backbone = tupe_tf.TupeBackbone(
        vocabulary_size=..., num_layers=12, num_heads=12, hidden_dim=768,
        intermediate_dim=3072, max_sequence_length=512,
        position_encoding="tupe-r", cls_relative="reference",
        segment_encoding="none", layer_norm_epsilon=1e-5,
        intermediate_activation="gelu")
    masked_lm = tupe_tf.TupeMaskedLM(backbone, preprocessor=None)
    tupe_tf.load_tupe_reference_weights(
        masked_lm, {k: v.numpy() for k, v in state.items()})
    ```
    """
    backbone = getattr(model, "backbone", model)
    if not isinstance(backbone, TupeBackbone):
        raise ValueError(
            "`model` must be a tupe_tf.TupeBackbone or TupeMaskedLM. "
            f"Received: {type(model).__name__}"
        )
    _check_backbone(backbone)
    head = getattr(model, "masked_lm_head", None)
    arrays = _by_short_name(state_dict, with_head=head is not None)
    pairs = _backbone_pairs(backbone)
    if head is not None:
        pairs.extend(_head_pairs(head))
        tied = arrays.pop("lm_head.weight", None)
        embedding = arrays.get("sentence_encoder.embed_tokens.weight")
        if tied is not None and not np.array_equal(tied, embedding):
            raise ValueError(
                "`lm_head.weight` must be the token embedding (tied), as in "
                "the authors' code."
            )
    names = {name for _, (name, _) in pairs}
    missing = sorted(names - set(arrays))
    unused = sorted(set(arrays) - names)
    if missing or unused:
        raise ValueError(
            "The state dict does not match this model. Missing: "
            f"{missing}; unused: {unused}"
        )
    for variable, (name, transform) in pairs:
        value = arrays[name] if transform is None else transform(arrays[name])
        if tuple(value.shape) != tuple(variable.shape):
            raise ValueError(
                f"`{name}` has shape {tuple(value.shape)} after conversion; "
                f"`{variable.path}` needs {tuple(variable.shape)}."
            )
        variable.assign(value)
