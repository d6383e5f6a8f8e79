"""Warm-starting a `TupeBackbone` from a keras-hub `BertBackbone`."""

from tupe_tf.models.tupe_backbone import TupeBackbone

_SHARED_SUBLAYERS = (
    "token_embedding",
    "position_embedding",
    "segment_embedding",
    "embeddings_layer_norm",
    "pooled_dense",
)


def load_bert_weights(tupe_backbone, bert_backbone):
    """Copies every matching weight of a BERT backbone into a TUPE backbone.

    Copies the token, position (for `bert`/`bert-r`; `sinusoidal`'s table
    is fixed) and segment (for `segment_encoding="input"`) embeddings, the
    embedding LayerNorm, every transformer layer (same variables: only the
    attention bias differs; a `query_logits` layer's table, e.g. `shaw`'s,
    is new) and the pooler. With `position_encoding="bert"` the two models then give the
    same outputs. New positional parameters keep their initial values and are
    returned, so the caller knows what still needs training.

    Args:
        tupe_backbone: a built `tupe_tf.TupeBackbone`.
        bert_backbone: a `keras_hub.models.BertBackbone` (e.g.
            `BertBackbone.from_preset("bert_base_en_uncased")`).

    Returns:
        The list of `tupe_backbone` variables that were not copied.

    Raises:
        ValueError: if the dimensions differ.

    Example:
    ```python
    bert = keras_hub.models.BertBackbone.from_preset("bert_base_en_uncased")
    backbone = tupe_tf.TupeBackbone(**dims_of(bert), position_encoding="tupe-r")
    new_variables = tupe_tf.load_bert_weights(backbone, bert)
    ```
    """
    if not isinstance(tupe_backbone, TupeBackbone):
        raise ValueError(
            "`tupe_backbone` must be a tupe_tf.TupeBackbone. Received: "
            f"{type(tupe_backbone).__name__}"
        )
    for name in (
        "vocabulary_size",
        "num_layers",
        "num_heads",
        "hidden_dim",
        "intermediate_dim",
    ):
        if getattr(tupe_backbone, name) != getattr(bert_backbone, name):
            raise ValueError(
                f"Cannot copy BERT weights: `{name}` differs (TUPE "
                f"{getattr(tupe_backbone, name)}, BERT "
                f"{getattr(bert_backbone, name)})."
            )
    pairs = []
    for name in _SHARED_SUBLAYERS:
        target = getattr(tupe_backbone, name, None)
        # `sinusoidal`'s fixed input table has no weights to copy.
        if target is not None and target.weights:
            pairs.append((target, getattr(bert_backbone, name)))
    copies_positions = any(
        target is tupe_backbone.position_embedding for target, _ in pairs
    )
    if copies_positions and (
        tupe_backbone.max_sequence_length != bert_backbone.max_sequence_length
    ):
        raise ValueError(
            "Cannot copy BERT's position embedding: `max_sequence_length` "
            f"differs (TUPE {tupe_backbone.max_sequence_length}, BERT "
            f"{bert_backbone.max_sequence_length})."
        )
    if tupe_backbone.segment_embedding is not None and (
        tupe_backbone.num_segments != bert_backbone.num_segments
    ):
        raise ValueError(
            "Cannot copy BERT's segment embedding: `num_segments` differs."
        )
    pairs.extend(
        zip(tupe_backbone.transformer_layers, bert_backbone.transformer_layers)
    )
    copied = set()
    for target, source in pairs:
        variables = _bert_variables(target)
        values = source.get_weights()
        if len(variables) != len(values):
            raise ValueError(
                f"Cannot copy BERT weights into `{target.name}`: "
                f"{len(values)} weights for {len(variables)} variables."
            )
        for variable, value in zip(variables, values):
            variable.assign(value)
        copied.update(id(v) for v in variables)
    return [v for v in tupe_backbone.weights if id(v) not in copied]


def _bert_variables(layer):
    """`layer`'s variables in order, less those of its `query_logits` hook
    (a transformer layer's own position table, which BERT lacks)."""
    hook = getattr(layer, "query_logits", None)
    new = {id(v) for v in hook.weights} if hook is not None else set()
    return [v for v in layer.weights if id(v) not in new]
