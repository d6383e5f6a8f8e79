"""Vocabulary learning (TF-Text) and loading."""

import os

import pytest

from data_pipeline import vocab as vocab_lib
from tests.data_pipeline import conftest


def test_build_vocabulary_reserved_first_and_atomic(tmp_path, corpus_file):
    out = tmp_path / "v" / "vocab.txt"
    result = vocab_lib.build_vocabulary(
        corpus_file, 200, str(out), lowercase=True
    )
    tokens = out.read_text(encoding="utf-8").split("\n")[:-1]
    assert tokens[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert len(tokens) == result["vocab_size"] <= 200
    assert "the" in tokens and "##e" in tokens
    assert [p.name for p in out.parent.iterdir()] == ["vocab.txt"]  # no temp
    vocab = vocab_lib.load_vocabulary(str(out))
    assert vocab.special_ids == vocab_lib.SpecialTokenIds(0, 1, 2, 3, 4)
    assert result["sha256"] == vocab.sha256


def test_build_vocabulary_lowercase(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("Apple Banana Cherry\n" * 30)
    out = tmp_path / "vocab.txt"
    vocab_lib.build_vocabulary(str(corpus), 50, str(out), lowercase=True)
    tokens = out.read_text().split()
    assert "apple" in tokens and "Apple" not in tokens


def test_build_vocabulary_empty_corpus(tmp_path):
    corpus = tmp_path / "empty.txt"
    corpus.write_text("\n\n   \n")
    with pytest.raises(ValueError, match="Empty corpus.*empty.txt"):
        vocab_lib.build_vocabulary(str(corpus), 50, str(tmp_path / "v.txt"))
    assert not os.path.exists(tmp_path / "v.txt")


def test_build_vocabulary_missing_input(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        vocab_lib.build_vocabulary(
            str(tmp_path / "missing.txt"), 50, str(tmp_path / "v.txt")
        )


def test_load_vocabulary_missing_special_token(tmp_path):
    path = conftest.write_vocab(tmp_path / "v.txt", drop=("[MASK]",))
    with pytest.raises(ValueError, match=r"v.txt.*\[MASK\]"):
        vocab_lib.load_vocabulary(path)


def test_load_vocabulary_special_ids_from_file(tmp_path):
    path = conftest.write_vocab(
        tmp_path / "v.txt",
        tokens=[
            "a",
            "[SEP]",
            "[MASK]",
            "b",
            "[CLS]",
            "[UNK]",
            "[PAD]",
            "[unused0]",
        ],
    )
    vocab = vocab_lib.load_vocabulary(path)
    assert vocab.special_ids == vocab_lib.SpecialTokenIds(
        pad=6, unk=5, cls=4, sep=1, mask=2
    )
    assert vocab.special_token_ids == (1, 2, 4, 5, 6, 7)


def test_load_vocabulary_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        vocab_lib.load_vocabulary(str(tmp_path / "nope.txt"))
    dup = conftest.write_vocab(
        tmp_path / "dup.txt",
        tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "a"],
    )
    with pytest.raises(ValueError, match="duplicate"):
        vocab_lib.load_vocabulary(dup)
