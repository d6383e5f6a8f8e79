"""The option table, the backbone's signature and the encoding table agree."""

import inspect

import pytest

from tupe_tf.models.position_encodings import POSITION_ENCODING_TABLE
from tupe_tf.models.tupe_backbone import TupeBackbone
from tupe_tf.utils.backbone_options import BACKBONE_OPTIONS
from tupe_tf.utils.backbone_options import OPTION_DEFAULTS
from tupe_tf.utils.backbone_options import POSITION_ENCODINGS
from tupe_tf.utils.backbone_options import POSITION_SHARINGS


def test_backbone_signature_defaults_equal_the_option_table():
    parameters = inspect.signature(TupeBackbone.__init__).parameters
    signature_defaults = {
        name: parameters[name].default
        for name in OPTION_DEFAULTS
        if name in parameters
    }
    assert signature_defaults == OPTION_DEFAULTS


def test_every_option_has_a_type_and_a_default_of_that_type():
    for option in BACKBONE_OPTIONS:
        assert option.default is None or isinstance(
            option.default, option.value_type
        ), option.name
        if option.choices is not None:
            assert option.default in option.choices + (None,), option.name


def test_the_encoding_table_lists_exactly_the_declared_encodings():
    assert tuple(POSITION_ENCODING_TABLE) == POSITION_ENCODINGS


def test_every_sharing_of_the_table_is_a_declared_sharing():
    for entry in POSITION_ENCODING_TABLE.values():
        assert set(entry.sharings) <= set(POSITION_SHARINGS), entry.name
    assert POSITION_ENCODING_TABLE["diet-abs"].sharings[0] == "layer-wise"
    assert POSITION_ENCODING_TABLE["diet-rel"].sharings[0] == "none"
    assert set(POSITION_ENCODING_TABLE["diet-rel"].sharings) == set(
        POSITION_SHARINGS
    )


def tiny_backbone(**options):
    return TupeBackbone(
        vocabulary_size=10,
        num_layers=1,
        num_heads=2,
        hidden_dim=8,
        intermediate_dim=8,
        **options,
    )


def out_of_range_value(valid):
    """A value just outside `valid` (below its low end, else above)."""
    if valid.low is not None:
        return valid.low if valid.low_open else valid.low - 1
    return valid.high if valid.high_open else valid.high + 1


@pytest.mark.parametrize(
    "option",
    [option for option in BACKBONE_OPTIONS if option.valid],
    ids=lambda option: option.name,
)
def test_a_numeric_option_outside_its_range_is_refused(option):
    value = option.value_type(out_of_range_value(option.valid))
    with pytest.raises(ValueError, match=f"`{option.name}` must be"):
        tiny_backbone(**{option.name: value})


@pytest.mark.parametrize(
    "option",
    [option for option in BACKBONE_OPTIONS if option.choices],
    ids=lambda option: option.name,
)
def test_a_string_option_outside_its_choices_is_refused(option):
    with pytest.raises(ValueError, match=f"`{option.name}` must be one of"):
        tiny_backbone(**{option.name: "tupe"})


def test_every_numeric_option_declares_its_range():
    assert [
        option.name
        for option in BACKBONE_OPTIONS
        if option.value_type in (int, float) and option.valid is None
    ] == []
