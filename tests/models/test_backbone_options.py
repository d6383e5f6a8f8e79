"""The option table, the backbone's signature and the encoding table agree."""

import inspect

from tupe_tf.backbone_options import BACKBONE_OPTIONS
from tupe_tf.backbone_options import OPTION_DEFAULTS
from tupe_tf.backbone_options import POSITION_ENCODINGS
from tupe_tf.backbone_options import POSITION_SHARINGS
from tupe_tf.models.position_encodings import POSITION_ENCODING_TABLE
from tupe_tf.models.tupe_backbone import TupeBackbone


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
