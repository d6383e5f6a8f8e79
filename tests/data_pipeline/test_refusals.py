"""Input that is not text, or not the vocabulary's text, is refused by the
single-process builders before anything is published."""

import gzip
import os

import pytest

from data_pipeline import corpus
from data_pipeline import shards
from data_pipeline import vocab as vocab_lib
from tests.data_pipeline import conftest
from tupe_tf.utils import fileio
from tupe_tf.utils.errors import UserError

SEQ = conftest.TEST_SEQ_LENGTH


def _config(input_file, vocab_file, output_dir, **kwargs):
    kwargs.setdefault("num_shards", 2)
    return conftest.shard_config(
        str(input_file), vocab_file, output_dir, **kwargs
    )


def _refusal(config):
    """The message of the `UserError` that `build_shards(config)` raises."""
    with pytest.raises(UserError) as error:
        shards.build_shards(config)
    return str(error.value)


def _tree(path):
    """Every file under `path` with its bytes (hidden ones included)."""
    return {
        os.path.relpath(os.path.join(root, name), path): open(
            os.path.join(root, name), "rb"
        ).read()
        for root, _, names in os.walk(path)
        for name in names
    }


# --- shards ------------------------------------------------------------------


def test_binary_input_is_refused_before_building(tmp_path, vocab_file):
    binary = conftest.write_binary(tmp_path)
    out = tmp_path / "out"
    message = _refusal(_config(binary, vocab_file, out))
    assert str(binary) in message and "byte 7" in message
    assert "--allow_nul_bytes" in message
    assert not out.exists()


def test_nul_after_the_sniffed_bytes_is_refused_while_reading(
    tmp_path, corpus_file, vocab_file
):
    text = open(corpus_file, "rb").read()
    assert len(text) > corpus.SNIFF_BYTES
    mixed = tmp_path / "mixed.txt"
    mixed.write_bytes(text + b"tail \0 bytes\n")
    line = text.count(b"\n") + 1
    out = tmp_path / "out"
    with pytest.raises(UserError, match=f"line {line} holds a NUL"):
        shards.build_shards(_config(mixed, vocab_file, out))
    assert not out.exists()


def test_undecodable_input_is_refused_then_let_through(tmp_path, vocab_file):
    junk = conftest.write_undecodable(tmp_path)
    out = tmp_path / "out"
    message = _refusal(_config(junk, vocab_file, out))
    assert str(junk) in message and "200 of its 200 non-blank lines" in message
    assert (
        "(100.0%)" in message and "--max_invalid_line_fraction=0.05" in message
    )
    assert not out.exists()
    # Let through, the replacement characters are [UNK]: the next refusal.
    with pytest.raises(UserError, match="--max_unk_fraction"):
        shards.build_shards(
            _config(junk, vocab_file, out, max_invalid_line_fraction=1)
        )
    assert not out.exists()
    manifest = shards.build_shards(
        _config(
            junk,
            vocab_file,
            out,
            max_invalid_line_fraction=1,
            max_unk_fraction=1,
        )
    )
    assert manifest["stats"]["corpus"]["invalid_utf8_lines"] == 200


def test_overrides_let_a_binary_file_through(tmp_path, vocab_file):
    binary = conftest.write_binary(tmp_path)
    manifest = shards.build_shards(
        _config(
            binary,
            vocab_file,
            tmp_path / "out",
            allow_nul_bytes=True,
            max_invalid_line_fraction=1,
            max_unk_fraction=1,
        )
    )
    assert manifest["num_examples"] > 0
    assert manifest["stats"]["unk_tokens"] > 0


def test_unk_heavy_text_is_refused_and_old_shards_stay(
    tmp_path, corpus_file, vocab_file
):
    greek = conftest.write_greek(tmp_path)
    out = tmp_path / "out"
    shards.build_shards(_config(corpus_file, vocab_file, out))
    before = _tree(out)
    message = _refusal(_config(greek, vocab_file, out, overwrite=True))
    assert str(greek) in message and vocab_file in message
    assert "100.0% of the 480 tokens are [UNK]" in message
    assert "--max_unk_fraction=0.05" in message
    assert "--max_unk_fraction=1" in message
    assert _tree(out) == before  # No temporary left, old shards untouched.
    manifest = shards.build_shards(
        _config(greek, vocab_file, out, overwrite=True, max_unk_fraction=1)
    )
    assert manifest["stats"]["unk_tokens"] == manifest["stats"]["text_tokens"]


def test_text_with_one_bad_byte_passes(tmp_path, corpus_file, vocab_file):
    text = bytearray(open(corpus_file, "rb").read())
    text[100] = 0xFF
    one_bad = tmp_path / "one_bad.txt"
    one_bad.write_bytes(bytes(text))
    manifest = shards.build_shards(
        _config(one_bad, vocab_file, tmp_path / "out")
    )
    assert manifest["stats"]["corpus"]["invalid_utf8_lines"] == 1
    assert manifest["stats"]["unk_tokens"] >= 1


def test_damaged_gzip_is_named_not_a_tensorflow_error(
    tmp_path, corpus_file, vocab_file
):
    not_gzip = tmp_path / "plain.gz"
    not_gzip.write_bytes(b"plain text, not gzip\n")
    with pytest.raises(UserError, match="Cannot read input file.*plain"):
        shards.build_shards(_config(not_gzip, vocab_file, tmp_path / "a"))
    # Truncated after the sniffed bytes: found while tf.data reads it, and
    # raised as the reader's error, not as TensorFlow's.
    data = gzip.compress(open(corpus_file, "rb").read() * 4)
    truncated = tmp_path / "cut.gz"
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(UserError, match="Cannot read input file.*cut"):
        shards.build_shards(_config(truncated, vocab_file, tmp_path / "b"))
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


# --- vocabulary ----------------------------------------------------------------


@pytest.mark.parametrize("learner", ["tokenizers", "tf_text"])
def test_vocabulary_builders_refuse_what_is_not_text(tmp_path, learner):
    binary = conftest.write_binary(tmp_path)
    junk = conftest.write_undecodable(tmp_path)
    out = tmp_path / "new" / "vocab.txt"
    with pytest.raises(UserError, match="ls is not text.*NUL"):
        vocab_lib.build_vocabulary(str(binary), 100, str(out), learner=learner)
    with pytest.raises(
        UserError, match="junk.txt is not UTF-8.*max_invalid_line"
    ):
        vocab_lib.build_vocabulary(str(junk), 100, str(out), learner=learner)
    assert not (tmp_path / "new").exists()
    settings = corpus.TextInputSettings(max_invalid_line_fraction=1)
    # Random bytes hold some valid 2-byte characters: a large alphabet.
    result = vocab_lib.build_vocabulary(
        str(junk), 2000, str(out), learner=learner, text_input=settings
    )
    assert result["corpus_stats"]["invalid_utf8_lines"] == 200


def test_vocabulary_output_is_checked_before_learning(tmp_path, corpus_file):
    with pytest.raises(ValueError, match="is a directory"):
        vocab_lib.build_vocabulary(corpus_file, 100, str(tmp_path))
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(fileio.OutputError, match="--output=.* is not writable"):
        vocab_lib.build_vocabulary(corpus_file, 100, str(blocker / "v.txt"))
    assert sorted(os.listdir(tmp_path)) == ["file"]


def test_embedded_corpus_passes_the_text_checks():
    stats = corpus.CorpusStats()
    path = corpus.embedded_corpus_path()
    settings = corpus.TextInputSettings()
    corpus.check_text_files([path], settings)
    for _ in corpus.text_line_batches([path], stats, text_input=settings):
        pass
    assert stats.nonblank_lines > 1000 and stats.invalid_utf8_lines == 0


# --- reading -------------------------------------------------------------------


def test_undecodable_start_is_refused_early(tmp_path):
    first = corpus.EARLY_CHECK_LINES
    path = tmp_path / "latin1.txt"
    path.write_bytes(b"caf\xe9 au lait\n" * first + b"fine\n" * (first * 50))
    settings = corpus.TextInputSettings()
    # Over the whole file the share is under the limit...
    assert first / (51 * first) < settings.max_invalid_line_fraction
    read = 0
    with pytest.raises(UserError, match=f"of the first {first} non"):
        for lines, _ in corpus.text_line_batches(
            [str(path)], text_input=settings
        ):
            read += len(lines)
    # ... but its start is refused before the rest is read.
    assert read < 2 * first


def test_a_split_line_counts_once(tmp_path):
    path = tmp_path / "long.txt"
    path.write_bytes(b"x\xff " * 30_000 + b"\nok\n")
    stats = corpus.CorpusStats()
    for _ in corpus.text_line_batches(
        [str(path)], stats, max_piece_bytes=1 << 12
    ):
        pass
    assert stats.long_lines_split == 1 and stats.invalid_utf8_lines == 1


def test_sniff_finds_empty_corpora_and_unreadable_files(tmp_path):
    settings = corpus.TextInputSettings()
    blank = tmp_path / "blank.txt"
    blank.write_text(" \n\n\t\n")
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    with pytest.raises(UserError, match="Empty corpus.*blank.txt"):
        corpus.resolve_input_files(f"{blank},{empty}", text_input=settings)
    (tmp_path / "text.txt").write_text("words\n")
    files = corpus.resolve_input_files(
        f"{blank},{tmp_path / 'text.txt'}", text_input=settings
    )
    assert len(files) == 2
    bad_bz2 = tmp_path / "x.bz2"
    bad_bz2.write_bytes(b"not bzip2")
    with pytest.raises(UserError, match="Cannot read input file.*x.bz2"):
        corpus.resolve_input_files(str(bad_bz2), text_input=settings)


# --- flags and vocabulary files ---------------------------------------------------


@pytest.mark.parametrize(
    "field,value,match",
    [
        (
            "max_seq_length",
            0,
            r"--max_seq_length=0 is out of range: it must be in \[8, 8192\]",
        ),
        ("max_seq_length", 1, "max_seq_length"),
        ("max_seq_length", 8193, "max_seq_length"),
        ("num_shards", 10**7, "ulimit"),
        ("max_unk_fraction", 1.5, "max_unk_fraction"),
        ("max_invalid_line_fraction", -0.1, "max_invalid_line_fraction"),
    ],
)
def test_bad_lengths_and_fractions_are_refused(
    tmp_path, corpus_file, vocab_file, field, value, match
):
    with pytest.raises(ValueError, match=match):
        shards.build_shards(
            _config(corpus_file, vocab_file, tmp_path / "o", **{field: value})
        )
    assert not (tmp_path / "o").exists()


def test_wrong_vocabulary_files_are_named(tmp_path):
    cases = {
        "binary": conftest.binary_bytes(),
        "nul": b"[PAD]\n\0\n",
        "empty": b"",
        "blank_line": b"[PAD]\n[UNK]\n\n[CLS]\n",
    }
    expected = {
        "binary": "is not UTF-8 text",
        "nul": "holds NUL bytes",
        "empty": "is empty",
        "blank_line": r"has an empty line \(line 3\)",
    }
    for name, data in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises(ValueError, match=f"{name} {expected[name]}"):
            vocab_lib.load_vocabulary(str(path))
    with pytest.raises(ValueError, match="is a directory"):
        vocab_lib.load_vocabulary(str(tmp_path))
    huge = tmp_path / "corpus_as_vocab.txt"
    with open(huge, "wb") as f:
        f.truncate(vocab_lib.MAX_VOCAB_FILE_BYTES + 1)  # Sparse: no disk.
    with pytest.raises(ValueError, match="MiB, not a vocabulary"):
        vocab_lib.load_vocabulary(str(huge))


# --- output directory --------------------------------------------------------------


def test_unwritable_output_dir_is_named(tmp_path, corpus_file, vocab_file):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(fileio.OutputError, match="not a directory"):
        shards.build_shards(_config(corpus_file, vocab_file, blocker))
    with pytest.raises(
        fileio.OutputError, match="--output_dir=.* is not writable"
    ):
        shards.build_shards(_config(corpus_file, vocab_file, blocker / "sub"))


def test_a_killed_runs_temporaries_do_not_block_the_next(
    tmp_path, corpus_file, vocab_file
):
    out = tmp_path / "out"
    out.mkdir()
    leftovers = [
        ".pretrain-00000-of-00002.tfrecord.abc123.tmp",
        ".manifest.json.def456.tmp",
    ]
    for name in leftovers:
        (out / name).write_bytes(b"partial")
    (out / ".beam-shards-xyz").mkdir()
    manifest = shards.build_shards(_config(corpus_file, vocab_file, out))
    assert sorted(os.listdir(out)) == sorted(
        [s["name"] for s in manifest["shards"]] + ["manifest.json"]
    )
