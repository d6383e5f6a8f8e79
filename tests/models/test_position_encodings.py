"""The option table: one entry per option, read by the backbone."""

import math
import types

import numpy as np
import pytest

from tupe_tf.layers import PositionBiasLayer
from tupe_tf.models.position_encodings import LAYER_BUILDERS
from tupe_tf.models.position_encodings import OPTION_SPECIFIC_ARGUMENTS
from tupe_tf.models.position_encodings import POSITION_ENCODING_TABLE
from tupe_tf.models.position_encodings import bert_initializer
from tupe_tf.models.position_encodings import build_layer
from tupe_tf.models.position_encodings import validated_encoding
from tupe_tf.utils.backbone_options import OPTION_DEFAULTS
from tupe_tf.utils.backbone_options import POSITION_ENCODINGS


def test_table_lists_every_option_once_in_order():
    assert tuple(POSITION_ENCODING_TABLE) == POSITION_ENCODINGS
    for name, entry in POSITION_ENCODING_TABLE.items():
        assert entry.name == name
        assert set(entry.arguments) <= set(OPTION_SPECIFIC_ARGUMENTS)
        assert set(OPTION_SPECIFIC_ARGUMENTS) <= set(OPTION_DEFAULTS)
    # Every layer a row names has a builder, and every builder a row.
    kinds = {e.layer for e in POSITION_ENCODING_TABLE.values()} | {
        e.query_logits for e in POSITION_ENCODING_TABLE.values()
    }
    assert kinds - {None} == set(LAYER_BUILDERS)


@pytest.mark.parametrize("name", POSITION_ENCODINGS)
def test_each_entry_builds_its_layer(name):
    entry, sharing = validated_encoding({"position_encoding": name})
    assert sharing == entry.sharings[0]
    args = types.SimpleNamespace(
        **OPTION_DEFAULTS,
        num_layers=2,
        num_heads=2,
        hidden_dim=16,
        head_dim=8,
        sharing=sharing,
        initializer=bert_initializer(),
    )
    args.max_sequence_length = 16
    layer = build_layer(entry.layer, args)
    assert (layer is None) == (name in ("bert", "sinusoidal", "nope", "shaw"))
    assert (entry.query_logits is None) == (name != "shaw")
    if entry.query_logits is not None:
        args.dtype = None
        query = np.ones((1, 5, 2, 8), "float32")
        term = build_layer(entry.query_logits, args)(query, query)
        assert term.shape == (1, 2, 5, 5)
    if layer is not None:
        assert isinstance(layer, PositionBiasLayer)
        layer(np.zeros((1, 5), "int32"))
        assert layer.content_free_bias(5).shape[-3:] in [(2, 5, 5), (1, 5, 5)]
    scale = entry.content_scale(8)
    expected = {"tupe-a": 16, "tupe-r": 16, "bert-ad": 32}.get(name)
    assert scale == (None if expected is None else 1 / math.sqrt(expected))
    assert entry.input_positions == (name in ("bert", "bert-r", "sinusoidal"))
    assert entry.input_table == (
        "sinusoidal" if name == "sinusoidal" else "learned"
    )


def test_defaults_of_sharing():
    def sharing(name, value=None):
        options = {"position_encoding": name, "position_sharing": value}
        return validated_encoding(options)[1]

    assert sharing("diet-abs") == "layer-wise"
    assert sharing("diet-rel") == "none"
    assert sharing("tupe-r", "layer-wise") == "layer-wise"


@pytest.mark.parametrize(
    "name, sharing, arguments, match",
    [
        ("bert-r", "none", {}, "position_sharing.*layer-wise"),
        ("bert", None, {"relative_buckets": 16}, "relative_buckets.*bert-r"),
        ("tupe-a", None, {"position_rank": 4}, "position_rank.*diet-abs"),
    ],
)
def test_refusals_name_the_argument(name, sharing, arguments, match):
    options = dict(arguments, position_encoding=name, position_sharing=sharing)
    with pytest.raises(ValueError, match=match):
        validated_encoding(options)
    # Defaults are always accepted.
    if name in POSITION_ENCODINGS:
        validated_encoding(dict(OPTION_DEFAULTS, position_encoding=name))
