"""Growing a trained model's position tables (`models.context_extension`).

The rule is checked on NumPy arrays; then, for every position encoding, a
model rebuilt at a longer `max_sequence_length` from a trained one gives the
trained model's outputs at the trained lengths.
"""

import numpy as np
import pytest
from keras.ops import convert_to_numpy as to_numpy

import tupe_tf
from tests.sizes import encoder_sizes
from tupe_tf.models.context_extension import copy_weights
from tupe_tf.models.context_extension import grow_length_table
from tupe_tf.models.context_extension import length_tables
from tupe_tf.utils.backbone_options import POSITION_ENCODINGS


def test_absolute_tables_repeat_their_trained_rows_after_the_leading_ones():
    table = np.arange(2 * 3 * 4).reshape(2, 3, 4)  # positions on axis 1
    grown = grow_length_table(table, 5, axis=1, leading=1)
    assert grown.shape == (2, 6, 4)
    # The leading row stays; positions 0..4 are trained rows 0, 1, 0, 1, 0.
    expected = table[:, [0, 1, 2, 1, 2, 1], :]
    np.testing.assert_array_equal(grown, expected)
    np.testing.assert_array_equal(grow_length_table(table, 3, 1), table)


def test_relative_tables_give_new_offsets_the_farthest_trained_value():
    # Offsets -2..2 of two heads.
    table = np.array([[1.0, 2, 3, 4, 5], [6, 7, 8, 9, 10]])
    grown = grow_length_table(table, 5, axis=1, layout="relative")
    np.testing.assert_array_equal(
        grown,
        [[1, 1, 1, 2, 3, 4, 5, 5, 5], [6, 6, 6, 7, 8, 9, 10, 10, 10]],
    )


def test_rows_past_the_trained_length_are_refilled_by_the_rule():
    table = np.arange(1, 7)  # 6 positions, the first 2 trained
    np.testing.assert_array_equal(
        grow_length_table(table, 5, axis=0, trained_length=2),
        [1, 2, 1, 2, 1],
    )
    # Offsets -3..3, trained at length 2 (offsets -1..1).
    relative = np.array([9, 9, 1, 2, 3, 9, 9])
    np.testing.assert_array_equal(
        grow_length_table(relative, 4, 0, "relative", trained_length=2),
        [1, 1, 1, 2, 3, 3, 3],
    )


@pytest.mark.parametrize("encoding", ["tupe-a", "diet-rel"])
def test_a_copy_refills_the_rows_a_shorter_training_left_untrained(encoding):
    trained, same = _backbone(12, encoding), _backbone(12, encoding)
    grown, _ = copy_weights(trained, same, trained_length=4)
    assert set(grown) == set(length_tables(trained))
    assert all(lengths == [4, 12] for lengths in grown.values())
    np.testing.assert_allclose(
        to_numpy(same(_inputs(4))["sequence_output"]),
        to_numpy(trained(_inputs(4))["sequence_output"]),
        atol=1e-6,
    )
    if encoding == "tupe-a":
        table = to_numpy(same.position_bias.position_embeddings)
        # The [CLS] row stays; position 4 starts as position 0.
        np.testing.assert_array_equal(table[1 + 4], table[1])


def test_a_table_does_not_shrink():
    with pytest.raises(
        ValueError, match="4 trained positions cannot grow to 2"
    ):
        grow_length_table(np.zeros((4, 3)), 2, axis=0)


def _backbone(length, encoding, **overrides):
    return tupe_tf.TupeBackbone(
        50,
        max_sequence_length=length,
        position_encoding=encoding,
        dropout=0.0,
        **encoder_sizes(16),
        **overrides,
    )


def _inputs(length):
    ids = np.random.default_rng(0).integers(1, 50, (2, length))
    return {
        "token_ids": ids.astype("int32"),
        "segment_ids": np.zeros((2, length), "int32"),
        "padding_mask": np.ones((2, length), "int32"),
    }


@pytest.mark.parametrize("encoding", POSITION_ENCODINGS)
def test_a_longer_copy_keeps_the_trained_outputs(encoding):
    trained, longer = _backbone(8, encoding), _backbone(20, encoding)
    grown, new = copy_weights(trained, longer)
    assert new == []
    table_bound = set(length_tables(trained))
    assert set(grown) == table_bound
    assert all(lengths == [8, 20] for lengths in grown.values())
    for n in (5, 8):
        np.testing.assert_allclose(
            to_numpy(longer(_inputs(n))["sequence_output"]),
            to_numpy(trained(_inputs(n))["sequence_output"]),
            atol=1e-6,
        )
    assert longer(_inputs(20))["sequence_output"].shape == (2, 20, 16)


def test_table_bound_encodings_are_the_ones_not_length_free():
    from tupe_tf.models.position_encodings import POSITION_ENCODING_TABLE

    bound = {
        name for name in POSITION_ENCODINGS if length_tables(_backbone(4, name))
    }
    # bert-r's input table is learned: length-bound, as bert's.
    assert bound == {
        name
        for name, entry in POSITION_ENCODING_TABLE.items()
        if not entry.length_free
    }
    assert bound == {
        "bert",
        "bert-r",
        "tupe-a",
        "tupe-r",
        "bert-ad",
        "diet-abs",
        "diet-rel",
    }


def test_a_new_rope_wavelength_copies_every_weight():
    trained = _backbone(8, "rope")
    rebased = _backbone(32, "rope", rope_max_wavelength=160000.0)
    assert copy_weights(trained, rebased) == ({}, [])
    for mine, theirs in zip(rebased.weights, trained.weights):
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy())


def test_other_widths_and_shorter_tables_are_refused_naming_both_shapes():
    with pytest.raises(ValueError, match=r"`token_embedding/embeddings`.*"):
        copy_weights(
            _backbone(8, "bert"),
            tupe_tf.TupeBackbone(
                50, max_sequence_length=8, **encoder_sizes(32)
            ),
        )
    with pytest.raises(
        ValueError,
        match=r"`position_embedding/embeddings`: shape \(8, 16\) in the "
        r"source, \(4, 16\) in the target",
    ):
        copy_weights(_backbone(8, "bert"), _backbone(4, "bert"))
