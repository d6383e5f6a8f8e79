"""Small generated fixtures for the data pipeline tests (no ../shared)."""

import os
import random

import pytest

WORDS = (
    "the quick brown fox jumps over lazy dog alpha beta gamma delta "
    "river mountain city village north south east west red green blue "
    "small large old new first second third paper stone water fire "
    "light dark music number science history language people world "
    "house garden school market"
).split()
PUNCTUATION = [".", ",", "!"]
TEST_SEQ_LENGTH = 32


def make_corpus_text(num_docs=30, seed=0, long_line_every=4):
    """Documents of lines of known words; some lines longer than a block."""
    rng = random.Random(seed)
    docs = []
    for d in range(num_docs):
        lines = []
        for i in range(rng.randint(2, 8)):
            n = rng.randint(2, 20)
            if long_line_every and (d * 8 + i) % (long_line_every * 8) == 3:
                n = rng.randint(40, 90)  # Longer than a 32-token block.
            words = [rng.choice(WORDS) for _ in range(n)]
            lines.append(" ".join(words) + rng.choice(PUNCTUATION))
        docs.append("\n".join(lines))
    return "\n\n".join(docs) + "\n"


def write_vocab(path, tokens=None, drop=()):
    tokens = tokens or (
        ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        + sorted(set(WORDS))
        + PUNCTUATION
        + [chr(c) for c in range(ord("a"), ord("z") + 1)]
        + ["##" + chr(c) for c in range(ord("a"), ord("z") + 1)]
    )
    tokens = [t for t in tokens if t not in drop]
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t in tokens))
    return str(path)


def binary_bytes(size=20_000, seed=0):
    """An executable-like file: an ELF header, NUL padding, random bytes."""
    rng = random.Random(seed)
    body = bytes(rng.randrange(256) for _ in range(size))
    return b"\x7fELF\x02\x01\x01" + b"\0" * 9 + body


def undecodable_bytes(num_lines=200, seed=0):
    """Lines of bytes >= 0x80 (not UTF-8) between ASCII words; no NUL."""
    rng = random.Random(seed)
    lines = []
    for _ in range(num_lines):
        junk = bytes(rng.randrange(0x80, 0x100) for _ in range(12))
        lines.append(b"the " + junk + b" dog")
    return b"\n".join(lines) + b"\n"


def greek_text(num_lines=60):
    """Text of words none of which the test vocabulary knows (8 a line)."""
    words = "αλφα βητα γαμμα δελτα ποταμος βουνο πολη".split()
    return "".join(
        " ".join(words[(i + j) % len(words)] for j in range(8)) + "\n"
        for i in range(num_lines)
    )


def write_binary(directory):
    """Writes `binary_bytes()` to `directory/ls`; returns its path."""
    path = directory / "ls"
    path.write_bytes(binary_bytes())
    return path


def write_undecodable(directory):
    """Writes `undecodable_bytes()` to `directory/junk.txt`; returns its path."""
    path = directory / "junk.txt"
    path.write_bytes(undecodable_bytes())
    return path


def write_greek(directory):
    """Writes `greek_text()` to `directory/greek.txt`; returns its path."""
    path = directory / "greek.txt"
    path.write_text(greek_text(), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("data_pipeline")


@pytest.fixture(scope="session")
def corpus_file(data_dir):
    path = data_dir / "corpus.txt"
    path.write_text(make_corpus_text(), encoding="utf-8")
    return str(path)


@pytest.fixture(scope="session")
def vocab_file(data_dir):
    return write_vocab(data_dir / "vocab.txt")


def shard_config(input_patterns, vocab_file, output_dir, **kwargs):
    """A `ShardConfig` of `TEST_SEQ_LENGTH`-token sequences; `kwargs` set
    its other fields."""
    from data_pipeline import shards

    kwargs.setdefault("max_seq_length", TEST_SEQ_LENGTH)
    return shards.ShardConfig(
        input_patterns=input_patterns,
        vocab_file=vocab_file,
        output_dir=str(output_dir),
        **kwargs,
    )


def _build(data_dir, corpus_file, vocab_file, name, **kwargs):
    from data_pipeline import shards

    output_dir = str(data_dir / name)
    config = shard_config(
        corpus_file, vocab_file, output_dir, num_shards=3, seed=7, **kwargs
    )
    manifest = shards.build_shards(config)
    return output_dir, manifest


@pytest.fixture(scope="session")
def dynamic_shards(data_dir, corpus_file, vocab_file):
    return _build(data_dir, corpus_file, vocab_file, "dynamic")


@pytest.fixture(scope="session")
def static_shards(data_dir, corpus_file, vocab_file):
    return _build(
        data_dir,
        corpus_file,
        vocab_file,
        "static",
        static_masking=True,
        max_predictions_per_seq=6,
        dupe_factor=2,
    )


@pytest.fixture()
def shard_copy(tmp_path, dynamic_shards):
    """A private copy of the dynamic shards, safe to damage."""
    import shutil

    src, _ = dynamic_shards
    dst = tmp_path / "shards"
    shutil.copytree(src, dst)
    return str(dst)


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path_factory, monkeypatch):
    monkeypatch.setenv(
        "TUPE_TF_CACHE_DIR", os.fspath(tmp_path_factory.getbasetemp() / "cache")
    )


@pytest.fixture()
def files(tmp_path, corpus_file, vocab_file):
    """Bad and good inputs, and the expected start of each error."""
    binary = write_binary(tmp_path)
    junk = write_undecodable(tmp_path)
    greek = write_greek(tmp_path)
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    (tmp_path / "dir").mkdir()
    no_cls = write_vocab(tmp_path / "no_cls.txt", drop=("[CLS]",))
    return {
        "no_cls": no_cls,
        "corpus": corpus_file,
        "vocab": vocab_file,
        "binary": str(binary),
        "junk": str(junk),
        "greek": str(greek),
        "empty": str(empty),
        "dir": str(tmp_path / "dir"),
    }


def good_flags(script, files, tmp_path):
    """`{flag: value}` of a run of `script` (build_shards.py or
    build_vocab.py) that succeeds on `files` (the `files` fixture), its
    outputs under `tmp_path` (`out/`, `v/`): the tests of refusals change
    one or two."""
    if script == "build_vocab.py":
        return {
            "input": files["corpus"],
            "output": str(tmp_path / "v" / "vocab.txt"),
            "vocab_size": "100",
        }
    return {
        "input": files["corpus"],
        "vocab_file": files["vocab"],
        "output_dir": str(tmp_path / "out"),
        "max_seq_length": str(TEST_SEQ_LENGTH),
        "num_shards": "2",
    }
