"""FULL-SENTENCES packing: lengths, boundaries, [SEP] placement, fill."""

import numpy as np
import pytest

from data_pipeline import corpus
from data_pipeline import packing

CLS, SEP = 2, 3


def _stream(docs):
    """docs: list of lists of sentence lengths -> token-batch tuples."""
    flat, splits, kinds, sentences = [], [0], [], []
    next_id = 100
    for doc in docs:
        for n in doc:
            ids = list(range(next_id, next_id + n))
            next_id += n
            sentences.append(ids)
            flat.extend(ids)
            splits.append(len(flat))
            kinds.append(corpus.NEW_LINE)
        splits.append(len(flat))  # Blank line: document boundary.
        kinds.append(corpus.NEW_LINE)
    batch = (
        np.array(flat, np.int32),
        np.array(splits, np.int64),
        np.array(kinds, np.int8),
    )
    return [batch], sentences


def _pack(docs, max_len):
    batches, sentences = _stream(docs)
    packer = packing.FullSentencesPacker(max_len, CLS, SEP)
    out = list(packing.pack_token_batches(batches, max_len, CLS, SEP, packer))
    return out, sentences, packer


def test_every_sequence_is_cls_text_sep_within_length():
    rng = np.random.default_rng(0)
    docs = [
        list(rng.integers(1, 40, size=rng.integers(1, 6))) for _ in range(50)
    ]
    out, _, _ = _pack(docs, 16)
    assert out
    for seq in out:
        assert 3 <= len(seq) <= 16
        assert seq[0] == CLS and seq[-1] == SEP
        assert CLS not in seq[1:]
        assert seq[1] != SEP, "a sequence never starts with a boundary [SEP]"
        assert not np.any((seq[:-1] == SEP) & (seq[1:] == SEP)), "no [SEP][SEP]"


def test_no_token_lost_or_reordered():
    rng = np.random.default_rng(1)
    docs = [
        list(rng.integers(1, 60, size=rng.integers(1, 6))) for _ in range(40)
    ]
    out, sentences, packer = _pack(docs, 24)
    text = np.concatenate([s[1:-1][s[1:-1] != SEP] for s in out])
    np.testing.assert_array_equal(text, np.concatenate(sentences))
    assert packer.stats.text_tokens == len(text)
    assert packer.stats.documents == 40


def test_sentences_that_fit_are_never_split():
    docs = [[5, 7, 3], [9, 9], [4, 6, 2, 8]]
    out, sentences, _ = _pack(docs, 14)  # capacity 12
    for sentence in sentences:
        hits = [s for s in out if sentence[0] in s]
        assert len(hits) == 1
        seq = hits[0].tolist()
        start = seq.index(sentence[0])
        assert seq[start : start + len(sentence)] == sentence


def test_document_boundary_sep_only_between_documents():
    out, _, _ = _pack([[3], [3], [3]], 64)
    assert len(out) == 1
    seq = out[0].tolist()
    # [CLS] a a a [SEP] b b b [SEP] c c c [SEP]
    assert seq == [
        CLS,
        100,
        101,
        102,
        SEP,
        103,
        104,
        105,
        SEP,
        106,
        107,
        108,
        SEP,
    ]
    # Sentences of one document are packed without a separator.
    out, _, _ = _pack([[3, 3]], 64)
    assert out[0].tolist() == [CLS, 100, 101, 102, 103, 104, 105, SEP]


def test_next_sentence_that_does_not_fit_starts_new_sequence():
    out, _, _ = _pack([[5, 5]], 12)  # capacity 10: 5 + 5 fits exactly
    assert [len(s) for s in out] == [12]
    out, _, _ = _pack([[5, 6]], 12)
    assert [len(s) - 2 for s in out] == [5, 6]


def test_long_sentence_is_split_into_full_blocks():
    out, _, packer = _pack([[3, 25]], 12)  # capacity 10
    lengths = [len(s) - 2 for s in out]
    assert lengths == [10, 10, 8]
    assert packer.stats.split_sentences == 1


def test_fill_ratio_high_for_short_sentences():
    rng = np.random.default_rng(2)
    docs = [list(rng.integers(5, 20, size=5)) for _ in range(100)]
    _, _, packer = _pack(docs, 128)
    assert packer.stats.fill_ratio(128) > 0.9
    assert packer.stats.sequences < 100 * 5


def test_continuation_pieces_join_the_same_sentence():
    packer = packing.FullSentencesPacker(12, CLS, SEP)
    out = packer.add(np.arange(100, 104))
    out += packer.add(np.arange(104, 108), continuation=True)
    out += packer.finish()
    assert [s.tolist() for s in out] == [[CLS] + list(range(100, 108)) + [SEP]]


def test_rejects_tiny_max_seq_length():
    with pytest.raises(ValueError, match="max_seq_length"):
        packing.FullSentencesPacker(2, CLS, SEP)
