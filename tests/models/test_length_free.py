"""`length_free` options: a trained model rebuilt longer runs unchanged."""

import numpy as np
import pytest

import tupe_tf
from tests.test_case import assert_allclose
from tests.test_case import tiny_backbone
from tests.test_case import to_numpy
from tupe_tf.models.position_encodings import POSITION_ENCODING_TABLE
from tupe_tf.utils.backbone_options import POSITION_ENCODINGS


def make_backbone(position_encoding, max_sequence_length):
    return tiny_backbone(
        position_encoding,
        max_sequence_length=max_sequence_length,
        dropout=0.0,
    )


def inputs(length, real):
    rng = np.random.default_rng(0)
    padding_mask = (np.arange(length)[None] < np.array(real)[:, None]).astype(
        "int32"
    )
    return {
        "token_ids": rng.integers(5, 50, (len(real), length)).astype("int32")
        * padding_mask,
        "segment_ids": np.zeros((len(real), length), "int32"),
        "padding_mask": padding_mask,
    }


@pytest.mark.parametrize("option", POSITION_ENCODINGS)
def test_weight_shapes_depend_on_length_only_for_table_options(option):
    short = make_backbone(option, 16)
    longer = make_backbone(option, 48)
    same = [w.shape for w in short.weights] == [w.shape for w in longer.weights]
    assert same == POSITION_ENCODING_TABLE[option].length_free


@pytest.mark.parametrize(
    "option",
    [name for name, e in POSITION_ENCODING_TABLE.items() if e.length_free],
)
def test_rebuilt_longer_keeps_outputs_and_runs_beyond_the_table(option):
    short = make_backbone(option, 16)
    longer = tupe_tf.TupeBackbone.from_config(
        {**short.get_config(), "max_sequence_length": 48}
    )
    longer.set_weights(short.get_weights())
    batch = inputs(12, (12, 7))
    assert_allclose(
        to_numpy(longer(batch)["sequence_output"]),
        to_numpy(short(batch)["sequence_output"]),
        atol=1e-5,
    )
    output = to_numpy(longer(inputs(40, (40, 25)))["sequence_output"])
    assert output.shape == (2, 40, 16) and np.all(np.isfinite(output))
