"""The TF Hub-style preprocessor against keras-hub's in-memory packing."""

import os

import numpy as np
import pytest
import tensorflow as tf

from tests.export.conftest import SEQ_LENGTH
from tests.export.conftest import TEXTS_A
from tests.export.conftest import TEXTS_B
from tests.export.conftest import VOCAB
from tests.export.conftest import encoder_inputs
from tests.export.conftest import in_memory_packed

pytestmark = pytest.mark.large


@pytest.fixture(scope="module")
def preprocessor(exports, load_once):
    return load_once(exports.preprocessor)


def _assert_same(exported, expected):
    for name in ("input_word_ids", "input_mask", "input_type_ids"):
        assert exported[name].dtype == tf.int32
        np.testing.assert_array_equal(
            exported[name].numpy(), expected[name], err_msg=name
        )


def test_call_on_single_texts_matches_keras_hub(exports, preprocessor):
    expected = encoder_inputs(
        in_memory_packed(exports.classifier_preprocessor, TEXTS_A)
    )
    exported = preprocessor(tf.constant(TEXTS_A))
    assert exported["input_word_ids"].shape == (len(TEXTS_A), SEQ_LENGTH)
    _assert_same(exported, expected)


def test_pairs_match_keras_hub_including_round_robin_truncation(
    exports, preprocessor
):
    expected = encoder_inputs(
        in_memory_packed(exports.classifier_preprocessor, TEXTS_A, TEXTS_B)
    )
    segments = [
        preprocessor.tokenize(tf.constant(t)) for t in (TEXTS_A, TEXTS_B)
    ]
    _assert_same(
        preprocessor.bert_pack_inputs(segments, seq_length=SEQ_LENGTH), expected
    )
    _assert_same(
        preprocessor([tf.constant(TEXTS_A), tf.constant(TEXTS_B)]), expected
    )
    # Row 3 is longer than SEQ_LENGTH in both segments: round robin splits
    # the 13 free places 7 + 6: [CLS] 7 [SEP] (type 0), 6 [SEP] (type 1).
    types = expected["input_type_ids"][3]
    assert expected["input_mask"][3].sum() == SEQ_LENGTH
    assert (types == 0).sum() == 9 and (types == 1).sum() == 7


def test_tokenize_matches_the_in_memory_tokenizer(exports, preprocessor):
    tokenizer = exports.classifier_preprocessor.tokenizer
    tokens = preprocessor.tokenize(tf.constant(TEXTS_A))
    assert tokens.shape.rank == 3  # [batch, words, wordpieces]
    expected = tokenizer(tf.constant(TEXTS_A))
    assert tokens.merge_dims(-2, -1).to_list() == list(expected)
    # The unknown words and the >100-byte word are [UNK].
    assert VOCAB.index("[UNK]") in tokens.merge_dims(-2, -1)[5].numpy()


def test_bert_pack_inputs_takes_other_lengths_and_flat_segments(
    exports, preprocessor
):
    tokenizer = exports.classifier_preprocessor.tokenizer
    flat = tf.ragged.constant(
        tokenizer(tf.constant(TEXTS_A)), dtype=tf.int32
    )  # [batch, wordpieces]
    packed = preprocessor.bert_pack_inputs([flat], seq_length=6)
    assert packed["input_word_ids"].shape == (len(TEXTS_A), 6)
    # "[CLS] the quick brown fox [SEP]"
    assert packed["input_word_ids"][0].numpy().tolist() == [
        VOCAB.index(t)
        for t in ["[CLS]", "the", "quick", "brown", "fox", "[SEP]"]
    ]
    # The empty text packs to "[CLS] [SEP]" and padding.
    assert packed["input_mask"][1].numpy().tolist() == [1, 1, 0, 0, 0, 0]


def test_vocabulary_is_an_asset(exports, preprocessor):
    asset = preprocessor.vocab_file.asset_path.numpy().decode()
    assert asset.startswith(os.path.join(exports.preprocessor, "assets"))
    with open(asset, encoding="utf-8") as f:
        assert f.read().splitlines() == VOCAB


@pytest.mark.parametrize(
    "bad_input",
    [
        tf.constant([1, 2]),  # wrong dtype
        tf.constant([["a", "b"]]),  # wrong rank
        tf.constant("a"),  # scalar
    ],
)
def test_signature_refuses_wrong_dtype_or_rank(preprocessor, bad_input):
    with pytest.raises((ValueError, TypeError, tf.errors.InvalidArgumentError)):
        preprocessor.signatures["serving_default"](text=bad_input)
