"""Text corpora: input file resolution, streaming line reading, and the
embedded default corpus (the English Wikipedia sample shipped in gensim)."""

import bz2
import contextlib
import dataclasses
import gzip
import os
import re
import zlib

from tupe_tf.utils import fileio
from tupe_tf.utils.errors import UserError
from tupe_tf.utils.settings import Settings
from tupe_tf.utils.settings import between
from tupe_tf.utils.settings import setting

# Lines longer than this many bytes are cut (at a space when possible) into
# pieces, so that one huge line never has to sit in memory or in a tokenizer
# batch at once. Pieces are flagged as continuations of the same sentence.
DEFAULT_MAX_PIECE_BYTES = 1 << 18

# Line kinds yielded next to each line by `text_line_batches`.
NEW_LINE = 0
CONTINUATION = 1

# How many bytes of each input file are looked at before anything is built
# (a NUL byte there means binary data; nothing but whitespace in every file
# means an empty corpus). Git's binary-file test reads 8000.
SNIFF_BYTES = 8192
# The share of undecodable lines is checked after this many non-blank lines
# of a file, and again at its end.
EARLY_CHECK_LINES = 1000
DEFAULT_MAX_INVALID_LINE_FRACTION = 0.05
# Names listed in an error message about several input files.
_LISTED_FILES = 3


@dataclasses.dataclass(kw_only=True)
class TextInputSettings(Settings):
    """What input the vocabulary and shard builders accept as text (their
    flags; keyword-only, so configs that inherit them keep their own field
    order). The checks run in `check_text_files` (before anything is
    built) and `text_line_batches` (while reading)."""

    allow_nul_bytes: bool = setting(
        False,
        help="Read input files that hold NUL bytes. By default such a file "
        "is refused as binary (or UTF-16) data, not UTF-8 text: its first "
        f"{SNIFF_BYTES} bytes are checked before anything is built, the "
        "rest while it is read.",
    )
    max_invalid_line_fraction: float = setting(
        DEFAULT_MAX_INVALID_LINE_FRACTION,
        help="Refuse an input file when more than this share of its "
        "non-blank lines hold bytes that are not UTF-8 (checked after its "
        f"first {EARLY_CHECK_LINES} non-blank lines and at its end; "
        "accepted lines have those bytes replaced with U+FFFD); 1 accepts "
        "any file.",
        valid=between(0, 1),
    )


@dataclasses.dataclass
class CorpusStats:
    """Counters filled while a corpus is read."""

    files: int = 0
    bytes_read: int = 0
    lines: int = 0
    nonblank_lines: int = 0
    invalid_utf8_lines: int = 0
    long_lines_split: int = 0


def resolve_input_files(input_patterns, text_input=None):
    """Expands comma-separated files/globs into a sorted, de-duplicated list.

    Args:
      input_patterns: a comma-separated string, a list of strings, or `None`
        for the embedded corpus (`embedded_corpus_path()`).
      text_input: optional `TextInputSettings`: then the files are also
        checked with `check_text_files` (binary, unreadable or all empty).

    Returns:
      A list of file paths, in the order given (each glob sorted).

    Raises:
      UserError: no pattern given, a path that is a directory, the refusals
        of `check_text_files`; `fileio.NoMatchingFileError` (also a
        `FileNotFoundError`): a file that does not exist or a glob that
        matches nothing.

    Example:
    >>> resolve_input_files("a.txt,corpus/*.gz")  # doctest: +SKIP
    ['a.txt', 'corpus/part-0.gz', 'corpus/part-1.gz']
    """
    if input_patterns is None:
        paths = [embedded_corpus_path()]
    else:
        paths = _expand_input_patterns(input_patterns)
    if text_input is not None:
        check_text_files(paths, text_input)
    return paths


def _expand_input_patterns(input_patterns):
    patterns = fileio.split_patterns(input_patterns)
    if not patterns:
        raise UserError(
            "--input names no file: give files or globs, or leave --input "
            "out for the embedded corpus."
        )
    paths = []
    for path in fileio.expand_patterns(patterns, "--input"):
        if os.path.isdir(path):
            raise UserError(
                f"--input: {path} is a directory, not a file (for the files "
                f"in it, pass '{os.path.join(path, '*')}')."
            )
        if path not in paths:
            paths.append(path)
    return paths


def describe_files(paths):
    """`a, b, c` or `a, b, c and 7 more`, for error messages."""
    listed = ", ".join(paths[:_LISTED_FILES])
    if len(paths) > _LISTED_FILES:
        listed += f" and {len(paths) - _LISTED_FILES} more"
    return listed


def empty_corpus_error(input_files, what="text"):
    """The `UserError` of a corpus without `what` (text, words...)."""
    return UserError(
        f"Empty corpus: no {what} in input file(s) "
        f"{describe_files(input_files)}."
    )


def _nul_error(path, where):
    return UserError(
        f"Input file {path} is not text: {where} holds a NUL byte (binary "
        "data, or UTF-16 text: convert it to UTF-8). Pass --allow_nul_bytes "
        "to read it anyway."
    )


def _read_error(path, error):
    return UserError(f"Cannot read input file {path}: {error}")


# What a damaged `.gz`/`.bz2` or an unreadable file raises while read.
_READ_ERRORS = (OSError, EOFError, zlib.error)


def check_text_files(input_files, text_input):
    """Refuses input files that are binary, unreadable or all empty.

    Reads the first `SNIFF_BYTES` bytes of each file (decompressed), so
    that a wrong input is refused before anything is built.

    Args:
      input_files: list of paths.
      text_input: `TextInputSettings`.

    Raises:
      UserError: a file cannot be read or decompressed; a NUL byte in a
        file's first bytes (unless `allow_nul_bytes`); every file empty or
        blank.
    """
    some_text = False
    for path in input_files:
        try:
            with open_text_file(path) as f:
                head = f.read(SNIFF_BYTES)
                complete = len(head) < SNIFF_BYTES or not f.read(1)
        except _READ_ERRORS as e:
            raise _read_error(path, e) from e
        if not text_input.allow_nul_bytes and b"\0" in head:
            offset = head.index(b"\0")
            raise _nul_error(path, f"byte {offset}")
        some_text = some_text or not complete or bool(head.strip())
    if not some_text:
        raise empty_corpus_error(input_files)


def _check_invalid_share(path, invalid, nonblank, text_input, at_end):
    """Refuses a file whose share of undecodable lines is too large."""
    limit = text_input.max_invalid_line_fraction
    if not nonblank or invalid <= limit * nonblank:
        return
    where = "its" if at_end else "the first"
    raise UserError(
        f"Input file {path} is not UTF-8 text: {invalid} of {where} "
        f"{nonblank} non-blank lines ({100 * invalid / nonblank:.1f}%) hold "
        f"bytes that are not UTF-8, more than --max_invalid_line_fraction="
        f"{limit:g}. Convert it to UTF-8, or pass "
        "--max_invalid_line_fraction=1 to read it with U+FFFD replacements."
    )


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
    try:
        with open_text_file(path) as f:
            yield from _pieces(f, stats, max_piece_bytes)
    except _READ_ERRORS as e:
        raise _read_error(path, e) from e
    # End of file is a document boundary.
    yield b"", NEW_LINE


def _pieces(f, stats, max_piece_bytes):
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


def text_line_batches(
    input_files,
    stats=None,
    batch_size=1024,
    max_piece_bytes=DEFAULT_MAX_PIECE_BYTES,
    text_input=None,
):
    """Streams lines of text files in batches, sanitized to valid UTF-8.

    Memory stays bounded: one batch of lines, each at most about
    `max_piece_bytes` (longer lines come as several pieces, the later ones of
    kind `CONTINUATION`). Bytes that are not UTF-8 are replaced with U+FFFD and
    the line is counted (once, however many pieces it has) in
    `stats.invalid_utf8_lines`. Each file ends with a blank line (a document
    boundary).

    Args:
      input_files: list of paths (see `resolve_input_files`).
      stats: optional `CorpusStats` to update.
      batch_size: lines per batch.
      max_piece_bytes: longest piece of a line handed on at once.
      text_input: optional `TextInputSettings`: refuse a file with a NUL
        byte or with too many lines that are not UTF-8 (`UserError`, raised
        as soon as it is known). `None` reads anything.

    Yields:
      `(lines, kinds)`: a list of UTF-8 `bytes` (no newline; `b""` is a blank
      line) and a list of ints (`NEW_LINE` or `CONTINUATION`).

    Raises:
      UserError: a file refused by `text_input`, or unreadable.

    Example:
    >>> for lines, kinds in text_line_batches(["a.txt"]):  # doctest: +SKIP
    ...   print(len(lines))
    """
    stats = stats if stats is not None else CorpusStats()
    check_nul = text_input is not None and not text_input.allow_nul_bytes
    lines, kinds = [], []
    for path in input_files:
        stats.files += 1
        line_number = nonblank = invalid = 0
        line_is_invalid = False
        for piece, kind in _file_pieces(path, stats, max_piece_bytes):
            if kind == NEW_LINE:
                stats.lines += 1
                line_number += 1
                line_is_invalid = False
            if piece:
                if kind == NEW_LINE:
                    stats.nonblank_lines += 1
                    nonblank += 1
                if check_nul and b"\0" in piece:
                    raise _nul_error(path, f"line {line_number}")
                try:
                    piece.decode("utf-8")
                except UnicodeDecodeError:
                    if not line_is_invalid:
                        line_is_invalid = True
                        stats.invalid_utf8_lines += 1
                        invalid += 1
                    piece = piece.decode("utf-8", "replace").encode("utf-8")
                if (
                    text_input is not None
                    and kind == NEW_LINE
                    and nonblank == EARLY_CHECK_LINES
                ):
                    _check_invalid_share(
                        path, invalid, nonblank, text_input, False
                    )
            lines.append(piece)
            kinds.append(kind)
            if len(lines) >= batch_size:
                yield lines, kinds
                lines, kinds = [], []
        if text_input is not None:
            _check_invalid_share(path, invalid, nonblank, text_input, True)
    if lines:
        yield lines, kinds


class GeneratorErrors:
    """Raises what a `tf.data.Dataset.from_generator` generator raised.

    An exception raised inside the generator would reach the caller as an
    `OpError`, after TensorFlow logged the Python traceback, and could leave a
    `tf.data` thread inside the generator's `py_func` when the process exits
    (the interpreter's exit then waits for it). So `wrap` remembers the
    exception and ends the dataset cleanly instead; `reraise`, around the
    code that iterates the dataset, raises the original exception when that
    code ends. Iterate the dataset only inside `reraise`: outside it, a
    failed read looks like the end of the data.

    Example:
    >>> errors = GeneratorErrors()  # doctest: +SKIP
    >>> ds = tf.data.Dataset.from_generator(errors.wrap(gen), ...)  # doctest: +SKIP
    >>> with errors.reraise():  # doctest: +SKIP
    ...     for x in ds: ...
    """

    def __init__(self):
        self.error = None

    def wrap(self, generator_fn):
        """`generator_fn`, remembering its exception and ending there."""

        def generate():
            try:
                yield from generator_fn()
            except Exception as e:  # pylint: disable=broad-except
                self.error = e

        return generate

    @contextlib.contextmanager
    def reraise(self):
        """Raises the generator's exception when the block ends, whether
        the block ran to its end or failed on the data's early end."""
        try:
            yield
        except Exception:
            if self.error is not None:
                raise self.error from None
            raise
        if self.error is not None:
            raise self.error


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
