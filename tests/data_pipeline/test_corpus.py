"""Input resolution, streaming reading, bad input, embedded corpus."""

import bz2
import gzip
import os

import pytest

from data_pipeline import corpus


def _read_all(files, **kwargs):
    stats = corpus.CorpusStats()
    lines, kinds = [], []
    for batch_lines, batch_kinds in corpus.text_line_batches(
        files, stats=stats, **kwargs
    ):
        lines += batch_lines
        kinds += batch_kinds
    return lines, kinds, stats


def test_missing_file_is_named(tmp_path):
    missing = str(tmp_path / "nope.txt")
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        corpus.resolve_input_files(missing)
    with pytest.raises(FileNotFoundError, match=r"nothing\*"):
        corpus.resolve_input_files(str(tmp_path / "nothing*"))
    with pytest.raises(ValueError, match="directory"):
        corpus.resolve_input_files(str(tmp_path))


def test_globs_and_commas(tmp_path):
    for name in ("b.txt", "a.txt", "c.gz"):
        (tmp_path / name).write_bytes(b"x\n")
    files = corpus.resolve_input_files(
        f"{tmp_path}/*.txt,{tmp_path}/c.gz,{tmp_path}/a.txt"
    )
    assert [os.path.basename(f) for f in files] == ["a.txt", "b.txt", "c.gz"]


def test_txt_gz_bz2_read_the_same(tmp_path):
    text = b"first line\nsecond line\n\nnew doc\n"
    (tmp_path / "a.txt").write_bytes(text)
    with gzip.open(tmp_path / "a.gz", "wb") as f:
        f.write(text)
    with bz2.open(tmp_path / "a.bz2", "wb") as f:
        f.write(text)
    results = [
        _read_all([str(tmp_path / n)])[0] for n in ("a.txt", "a.gz", "a.bz2")
    ]
    assert results[0] == [b"first line", b"second line", b"", b"new doc", b""]
    assert results[0] == results[1] == results[2]


def test_non_utf8_bytes_are_replaced_and_counted(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"good line\nbad \xff\xfe bytes\nalso \xc3 bad\nfine\n")
    lines, _, stats = _read_all([str(path)])
    assert stats.invalid_utf8_lines == 2
    assert lines[1] == "bad \ufffd\ufffd bytes".encode("utf-8")
    for line in lines:
        line.decode("utf-8")  # All valid now.


def test_huge_line_is_read_in_bounded_pieces(tmp_path):
    words = [f"w{i % 977}" for i in range(2_100_000)]  # >10 MB, one line
    line = " ".join(words)
    path = tmp_path / "huge.txt"
    path.write_text("short\n" + line + "\nafter\n")
    assert os.path.getsize(path) > 10_000_000
    limit = 1 << 16
    lines, kinds, stats = _read_all(
        [str(path)], max_piece_bytes=limit, batch_size=8
    )
    assert max(len(x) for x in lines) <= 2 * limit
    assert stats.long_lines_split == 1
    assert lines[0] == b"short" and lines[-2:] == [b"after", b""]
    pieces = lines[1:-2]
    assert kinds[1] == corpus.NEW_LINE
    assert set(kinds[2:-2]) == {corpus.CONTINUATION}
    # Pieces are cut at spaces: joining them restores the line exactly.
    assert b"".join(pieces).decode() == line


def test_cut_never_splits_a_utf8_character():
    piece = "é".encode() * 10
    cut = corpus._split_point(piece[:7])  # pylint: disable=protected-access
    piece[:cut].decode("utf-8")
    assert cut == 6


def test_embedded_corpus_is_plain_text(tmp_path):
    path = corpus.embedded_corpus_path(str(tmp_path))
    assert path.startswith(str(tmp_path))
    text = open(path, encoding="utf-8").read()
    assert len(text) > 2_000_000
    assert "\n\n" in text  # blank line between articles
    assert "[[" not in text and "'''" not in text and "{{" not in text
    assert text.startswith("Anarchism is a political philosophy")
    mtime = os.path.getmtime(path)
    assert corpus.embedded_corpus_path(str(tmp_path)) == path
    assert os.path.getmtime(path) == mtime  # cached, not rewritten
