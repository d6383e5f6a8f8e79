"""Text corpora: input file resolution, streaming line reading, and the
embedded default corpus (the English Wikipedia sample shipped in gensim)."""

import bz2
import dataclasses
import gzip
import os
import re

from data_pipeline import fileio

# Lines longer than this many bytes are cut (at a space when possible) into
# pieces, so that one huge line never has to sit in memory or in a tokenizer
# batch at once. Pieces are flagged as continuations of the same sentence.
DEFAULT_MAX_PIECE_BYTES = 1 << 18

# Line kinds yielded next to each line by `text_line_batches`.
NEW_LINE = 0
CONTINUATION = 1


@dataclasses.dataclass
class CorpusStats:
    """Counters filled while a corpus is read."""

    files: int = 0
    bytes_read: int = 0
    lines: int = 0
    nonblank_lines: int = 0
    invalid_utf8_lines: int = 0
    long_lines_split: int = 0


def resolve_input_files(input_patterns):
    """Expands comma-separated files/globs into a sorted, de-duplicated list.

    Args:
      input_patterns: a comma-separated string, a list of strings, or `None`
        for the embedded corpus (`embedded_corpus_path()`).

    Returns:
      A list of file paths, in the order given (each glob sorted).

    Raises:
      FileNotFoundError: naming a file that does not exist or a glob that
        matches nothing.
      ValueError: if no pattern is given or a path is a directory.

    Example:
    >>> resolve_input_files("a.txt,corpus/*.gz")  # doctest: +SKIP
    ['a.txt', 'corpus/part-0.gz', 'corpus/part-1.gz']
    """
    if input_patterns is None:
        return [embedded_corpus_path()]
    patterns = fileio.split_patterns(input_patterns)
    if not patterns:
        raise ValueError("No input file given.")
    paths = []
    for path in fileio.expand_patterns(patterns, "Input"):
        if os.path.isdir(path):
            raise ValueError(f"Input path is a directory, not a file: {path}")
        if path not in paths:
            paths.append(path)
    return paths


def open_text_file(path):
    """Opens a `.txt`, `.gz` or `.bz2` file for binary reading."""
    if path.endswith(".gz"):
        return gzip.open(path, "rb")
    if path.endswith(".bz2"):
        return bz2.open(path, "rb")
    return open(path, "rb", buffering=1 << 20)


def _split_point(piece):
    """Where to cut an over-long piece: after its last space, else at a UTF-8
    character boundary."""
    cut = piece.rfind(b" ")
    if cut > 0:
        return cut + 1
    cut = len(piece)
    # Do not cut inside a multi-byte character (continuation bytes 10xxxxxx).
    while cut > 1 and (piece[cut - 1] & 0xC0) == 0x80:
        cut -= 1
    if cut > 0 and piece[cut - 1] >= 0xC0:
        cut -= 1
    return max(cut, 1)


def _file_pieces(path, stats, max_piece_bytes):
    """Yields `(bytes_piece, kind)` for one file, ending with a blank line."""
    with open_text_file(path) as f:
        carry = b""
        continuing = False
        while True:
            chunk = f.readline(max_piece_bytes)
            if not chunk and not carry:
                break
            stats.bytes_read += len(chunk)
            piece = carry + chunk
            carry = b""
            # readline() returns less than the limit only at a newline or EOF.
            if piece.endswith(b"\n") or len(chunk) < max_piece_bytes:
                line = piece.rstrip(b"\r\n")
                yield line, CONTINUATION if continuing else NEW_LINE
                continuing = False
                if not chunk:
                    break
                continue
            # A partial line: cut it at a space and carry the rest over.
            if not continuing:
                stats.long_lines_split += 1
            cut = _split_point(piece)
            carry = piece[cut:]
            yield piece[:cut], CONTINUATION if continuing else NEW_LINE
            continuing = True
    # End of file is a document boundary.
    yield b"", NEW_LINE


def text_line_batches(
    input_files,
    stats=None,
    batch_size=1024,
    max_piece_bytes=DEFAULT_MAX_PIECE_BYTES,
):
    """Streams lines of text files in batches, sanitized to valid UTF-8.

    Memory stays bounded: one batch of lines, each at most about
    `max_piece_bytes` (longer lines come as several pieces, the later ones of
    kind `CONTINUATION`). Bytes that are not UTF-8 are replaced with U+FFFD and
    the line is counted in `stats.invalid_utf8_lines`. Each file ends with a
    blank line (a document boundary).

    Args:
      input_files: list of paths (see `resolve_input_files`).
      stats: optional `CorpusStats` to update.
      batch_size: lines per batch.
      max_piece_bytes: longest piece of a line handed on at once.

    Yields:
      `(lines, kinds)`: a list of UTF-8 `bytes` (no newline; `b""` is a blank
      line) and a list of ints (`NEW_LINE` or `CONTINUATION`).

    Example:
    >>> for lines, kinds in text_line_batches(["a.txt"]):  # doctest: +SKIP
    ...   print(len(lines))
    """
    stats = stats if stats is not None else CorpusStats()
    lines, kinds = [], []
    for path in input_files:
        stats.files += 1
        for piece, kind in _file_pieces(path, stats, max_piece_bytes):
            if kind == NEW_LINE:
                stats.lines += 1
            if piece:
                if kind == NEW_LINE:
                    stats.nonblank_lines += 1
                try:
                    piece.decode("utf-8")
                except UnicodeDecodeError:
                    stats.invalid_utf8_lines += 1
                    piece = piece.decode("utf-8", "replace").encode("utf-8")
            lines.append(piece)
            kinds.append(kind)
            if len(lines) >= batch_size:
                yield lines, kinds
                lines, kinds = [], []
    if lines:
        yield lines, kinds


# ---------------------------------------------------------------------------
# Embedded default corpus.

GENSIM_WIKI_SAMPLE = (
    "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
)
# Bump when the markup cleaning changes, so stale caches are not reused.
_EMBEDDED_CORPUS_VERSION = 1
_EMBEDDED_CORPUS_NAME = f"enwiki-gensim-sample-v{_EMBEDDED_CORPUS_VERSION}.txt"

_BOLD_ITALIC_RE = re.compile(r"'{2,}")
_SPACES_RE = re.compile(r"[ \t]+")
_MIN_PARAGRAPH_CHARS = 20


def default_cache_dir():
    """`$TUPE_TF_CACHE_DIR`, else `~/.cache/tupe_tf`."""
    return os.environ.get("TUPE_TF_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "tupe_tf"
    )


def _clean_paragraphs(wiki_text):
    """Plain-text paragraphs of an article after gensim's markup stripping."""
    from gensim.corpora import wikicorpus  # pylint: disable=g-import-not-at-top

    text = wikicorpus.filter_wiki(wiki_text)
    paragraphs = []
    for line in text.split("\n"):
        line = line.strip()
        # Headings ("==History=="), table and list remnants are not prose.
        if not line or line[0] in "=|{}!":
            continue
        line = line.lstrip("*#:; ").strip()
        line = _BOLD_ITALIC_RE.sub("", line)
        line = _SPACES_RE.sub(" ", line).strip()
        if len(line) >= _MIN_PARAGRAPH_CHARS and " " in line:
            paragraphs.append(line)
    return paragraphs


def iter_embedded_articles():
    """Yields `(title, paragraphs)` of the gensim English Wikipedia sample.

    Uses `gensim.corpora.wikicorpus.extract_pages` (main namespace only) and
    `filter_wiki` for the markup; no network.
    """
    from gensim.corpora import wikicorpus  # pylint: disable=g-import-not-at-top
    from gensim.test.utils import datapath  # pylint: disable=g-import-not-at-top

    with bz2.open(datapath(GENSIM_WIKI_SAMPLE), "rb") as f:
        for title, text, _ in wikicorpus.extract_pages(
            f, filter_namespaces=("0",)
        ):
            if text.lstrip().lower().startswith("#redirect"):
                continue
            paragraphs = _clean_paragraphs(text)
            if paragraphs:
                yield title, paragraphs


def write_embedded_corpus(output_file):
    """Writes the gensim Wikipedia sample as plain text.

    One paragraph per line, a blank line between articles; written to a
    temporary file and renamed.

    Args:
      output_file: destination path.

    Returns:
      The number of articles written.
    """
    parts = []
    articles = 0
    for _, paragraphs in iter_embedded_articles():
        parts.append("\n".join(paragraphs) + "\n\n")
        articles += 1
    fileio.write_text_atomically(output_file, "".join(parts))
    return articles


def embedded_corpus_path(cache_dir=None):
    """Path of the embedded default corpus as plain text, created once.

    The English Wikipedia sample inside the `gensim` package (about 200
    articles, ~3 MB of text) is converted with `write_embedded_corpus` into
    `<cache_dir>/enwiki-gensim-sample-v1.txt` the first time and reused after.

    Args:
      cache_dir: directory for the text file; default `default_cache_dir()`
        (`$TUPE_TF_CACHE_DIR` or `~/.cache/tupe_tf`).

    Returns:
      The path of the text file.

    Example:
    >>> path = embedded_corpus_path()  # doctest: +SKIP
    >>> open(path).readline()[:9]  # doctest: +SKIP
    'Anarchism'
    """
    cache_dir = cache_dir or default_cache_dir()
    path = os.path.join(cache_dir, _EMBEDDED_CORPUS_NAME)
    if not os.path.isfile(path):
        write_embedded_corpus(path)
    return path
