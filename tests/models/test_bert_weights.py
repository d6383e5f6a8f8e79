"""`load_bert_weights`: keras-hub's BERT into a TupeBackbone. The `bert`
option with copied weights is keras-hub's BERT; for the other options only
their own positional parameters stay new."""

import keras_hub
import pytest

import tupe_tf
from tests.models.backbone_cases import FFN
from tests.models.backbone_cases import HEADS
from tests.models.backbone_cases import HIDDEN
from tests.models.backbone_cases import LAYERS
from tests.models.backbone_cases import MAX_LEN
from tests.models.backbone_cases import SIZES
from tests.models.backbone_cases import VOCAB
from tests.models.backbone_cases import make_backbone
from tests.models.backbone_cases import make_inputs
from tests.models.backbone_cases import shaw_tables
from tests.test_case import assert_allclose
from tests.test_case import assert_array_equal
from tests.test_case import randomize


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


def test_load_bert_weights_refuses_other_dims():
    bert = keras_hub.models.BertBackbone(
        **dict(SIZES, intermediate_dim=2 * FFN)
    )
    with pytest.raises(ValueError, match="intermediate_dim"):
        tupe_tf.load_bert_weights(make_backbone(position_encoding="bert"), bert)


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
