"""The fast WordPiece learner and its vocabulary under TF-Text's tokenizers."""

import collections
import random

import pytest

from data_pipeline import vocab as vocab_lib
from data_pipeline import wordpiece_learner
from tests.data_pipeline import conftest

RESERVED = list(vocab_lib.RESERVED_TOKENS)
# Accents, CJK, ASCII and Unicode punctuation, digits, odd whitespace.
TRICKY = (
    "Héllo, Wörld! Café naïve RÉSUMÉ 東京タワー don't x\u0301 tab\there "
    "snake_case «quoted» 1,000.50 a~b|c @user #tag 50% \u00a0nbsp\u2003em "
    "e-mail (parens) [brackets] {braces} semi;colon\u2014dash "
    "Straße ½ \ufb01ne \u2026 \u00b5m \u01c4"
)


def _sample_lines(num_lines=300, seed=0):
    rng = random.Random(seed)
    words = conftest.WORDS + TRICKY.split()
    lines = [
        " ".join(rng.choice(words) for _ in range(rng.randint(3, 15)))
        for _ in range(num_lines)
    ]
    return lines + [TRICKY]


@pytest.mark.parametrize("lowercase", [True, False])
def test_count_words_matches_bert_pre_tokenizer(lowercase):
    from tokenizers import pre_tokenizers

    lines = _sample_lines(50)
    normalizer = wordpiece_learner.BertNormalizer(lowercase)
    pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    expected = collections.Counter(
        word
        for line in lines
        for word, _ in pre_tokenizer.pre_tokenize_str(normalizer(line))
    )
    assert wordpiece_learner.count_words(lines, lowercase) == expected
    # Batches (lists of lines) count the same.
    assert wordpiece_learner.count_words([lines], lowercase) == expected


@pytest.mark.parametrize("lowercase", [True, False])
def test_tf_text_tokenizes_with_the_learned_vocabulary(lowercase):
    from tokenizers import pre_tokenizers

    lines = _sample_lines()
    tokens = wordpiece_learner.learn_from_lines(lines, 300, lowercase, RESERVED)
    assert tokens[:5] == RESERVED and len(tokens) <= 300
    assert len(set(tokens)) == len(tokens)
    fast = vocab_lib.fast_bert_tokenizer(tokens, lowercase, "string")
    pieces = fast.tokenize(lines)
    if pieces.shape.rank == 3:  # [lines, words, pieces] in some versions.
        pieces = pieces.merge_dims(1, 2)
    assert b"[UNK]" not in pieces.flat_values.numpy().tolist()
    normalizer = wordpiece_learner.BertNormalizer(lowercase)
    pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    for line, line_pieces in zip(lines, pieces.to_list()):
        words = []  # A piece without `##` starts a word.
        for piece in line_pieces:
            if piece.startswith(b"##"):
                assert words, line
                words[-1] += piece[2:]
            else:
                words.append(piece)
        expected = [
            w.encode("utf-8")
            for w, _ in pre_tokenizer.pre_tokenize_str(normalizer(line))
        ]
        assert words == expected, line


def test_vocabulary_layout_and_every_char_in_both_forms():
    tokens = wordpiece_learner.learn_from_lines(
        _sample_lines(), 200, True, RESERVED
    )
    singles = {t for t in tokens[5:] if len(t) == 1}
    continuations = {t[2:] for t in tokens[5:] if len(t) == 3 and t[:2] == "##"}
    assert singles and singles == continuations
    assert "the" in tokens and len(tokens) == 200


def test_counts_give_the_same_vocabulary_in_any_order():
    lines = _sample_lines()
    from_lines = wordpiece_learner.learn_from_lines(lines, 250, True, RESERVED)
    counts = wordpiece_learner.count_words(lines, True)
    # Merged from two halves in another order, as a distributed count does.
    half = len(lines) // 2
    merged = wordpiece_learner.count_words(lines[half:], True)
    merged.update(wordpiece_learner.count_words(lines[:half], True))
    assert merged == counts
    items = list(merged.items())
    random.Random(3).shuffle(items)
    for _ in range(3):  # The trainer's hash maps change from call to call.
        assert (
            wordpiece_learner.learn_from_word_counts(items, 250, RESERVED)
            == from_lines
        )


def test_max_words_bounds_the_counts_and_keeps_the_frequent_words():
    # "the" in every line; every other word new: the table would grow
    # without bound.
    lines = [f"the w{i}a w{i}b" for i in range(500)]
    counts = wordpiece_learner.count_words(lines, True, max_words=50)
    assert len(counts) <= 100
    assert counts["the"] == 500  # always among the kept: exact
    exact = wordpiece_learner.count_words(lines, True)
    assert len(exact) == 1001
    # Below the bound nothing changes.
    assert wordpiece_learner.count_words(lines, True, max_words=600) == exact


def test_learning_uses_the_max_words_most_frequent_words():
    counts = wordpiece_learner.count_words(_sample_lines(), True)
    top = dict(wordpiece_learner.most_frequent(counts.items(), 40))
    assert (
        len(top) == 40
        and min(top.values()) >= sorted(counts.values(), reverse=True)[39]
    )
    capped = wordpiece_learner.learn_from_word_counts(
        counts, 150, RESERVED, max_words=40
    )
    assert capped == wordpiece_learner.learn_from_word_counts(
        top, 150, RESERVED, max_words=None
    )
    assert capped != wordpiece_learner.learn_from_word_counts(
        counts, 150, RESERVED, max_words=None
    )
    with pytest.raises(ValueError, match="max_words"):
        vocab_lib.VocabConfig(output_file="v.txt", max_words=0).validate()


def test_alphabet_is_capped_like_tf_text(monkeypatch):
    monkeypatch.setattr(wordpiece_learner, "MAX_ALPHABET", 4)
    counts = {"aab": 10, "ba": 5, "cd": 3, "xyz": 1}
    tokens = wordpiece_learner.learn_from_word_counts(counts, 40, RESERVED)
    chars = {t[-1] for t in tokens[5:] if len(t) == 1}
    assert chars == {"a", "b", "c", "d"}  # The 4 most frequent.
    assert not any("x" in t for t in tokens)


def test_errors():
    with pytest.raises(ValueError, match="No words"):
        wordpiece_learner.learn_from_word_counts({}, 50, RESERVED)
    with pytest.raises(ValueError, match="too small"):
        wordpiece_learner.learn_from_word_counts({"abcdef": 2}, 12, RESERVED)


@pytest.mark.parametrize("learner", ["tokenizers", "tf_text"])
def test_build_vocabulary_learners(tmp_path, corpus_file, learner):
    out = tmp_path / "vocab.txt"
    result = vocab_lib.build_vocabulary(
        corpus_file, 120, str(out), lowercase=True, learner=learner
    )
    tokens = out.read_text(encoding="utf-8").splitlines()
    assert result["learner"] == learner
    assert tokens[:5] == RESERVED and len(tokens) == result["vocab_size"]
    assert "the" in tokens and "##e" in tokens
    vocab_lib.load_vocabulary(str(out))


def test_build_vocabulary_bad_learner(tmp_path, corpus_file):
    with pytest.raises(ValueError, match="learner must be one of"):
        vocab_lib.build_vocabulary(
            corpus_file, 120, str(tmp_path / "v.txt"), learner="spm"
        )
