"""Fast WordPiece learning with the `tokenizers` library (Rust).

The vocabulary is the one TF-Text's `FastBertTokenizer` expects: its
normalisation (`BertNormalizer`: control characters dropped, CJK characters
split, optional NFKC case folding with accent stripping) and BERT's
pre-tokenization (whitespace and punctuation), `##` on continuation
pieces, the reserved tokens first (`[UNK]` at the id TF-Text looks up by
name), and, like TF-Text's learner (`ensure_all_tokens_exist`), every
character of the alphabet both as a word start `c` and as a continuation
`##c`, so a word made of known characters never becomes `[UNK]`.

Learning is split in two steps so that a distributed engine can do the
first: `count_words` (linear in the corpus; `beam_vocab.py` runs it as a
Beam combine) and `learn_from_word_counts` (on the merged counts, the same
function for every engine, deterministic), so the single-process and the
Beam vocabularies are equal.
"""

import collections
import collections.abc
import heapq
import unicodedata

import regex

from data_pipeline import corpus
from tupe_tf.utils.errors import UserError

# TF-Text's learner keeps at most this many distinct characters
# (`wordpiece_tokenizer_learner_lib.learn(max_unique_chars=1000)`).
MAX_ALPHABET = 1000
# Longer words are left out of learning: TF-Text's `FastBertTokenizer`
# turns a word of more than `max_bytes_per_word` (100) bytes into one
# `[UNK]`, so none of its pieces would ever be used (TF-Text's learner
# leaves out words of more than 50 characters, `max_token_length`). Without
# this, one huge "word" (a long line without spaces: base64, hex dumps)
# keeps the trainer busy for hours.
MAX_WORD_BYTES = 100
# Longest string handed to the trainer when replaying word counts.
_REPLAY_CHUNK_CHARS = 1 << 20
_CONTINUATION = "##"

# `BertPreTokenizer`: words are runs of characters that are neither
# whitespace nor punctuation (ASCII punctuation or Unicode category P); each
# punctuation character is a word of its own.
_PUNCT = r"!-/:-@\[-`{-~\p{P}"
_WORD_RE = regex.compile(rf"[^\s{_PUNCT}]+|[{_PUNCT}]")

# Words the learner keeps, the most frequent first. Beyond this rank words
# are seen a handful of times and their pieces are already supplied by the
# frequent words, while the learner's memory grows with every distinct word
# (the counts, and the trainer's per-word splits). Capping them keeps peak
# memory flat as the corpus grows (docs/benchmarks.md).
DEFAULT_MAX_WORDS = 250_000
MAX_WORDS_HELP = (
    "--learner=tokenizers: learn from at most this many distinct words, the "
    "most frequent (ties: word order). While counting, the table of counts "
    "is cut back to them whenever it holds twice as many, which bounds "
    "memory; below that (a corpus with fewer distinct words) the counts "
    "are exact and the vocabulary is the same for both engines."
)

LEARNER_TOKENIZERS = "tokenizers"
LEARNER_TF_TEXT = "tf_text"
LEARNERS = (LEARNER_TOKENIZERS, LEARNER_TF_TEXT)
DEFAULT_LEARNER = LEARNER_TOKENIZERS
LEARNER_HELP = (
    "WordPiece learner: 'tokenizers' (BERT-split word counts, then the "
    "`tokenizers` library's Rust trainer; fast, the default) or 'tf_text' "
    "(TF-Text's bert_vocab_from_dataset; slow)."
)


def _bert_normalizer(lowercase):
    from tokenizers import normalizers  # pylint: disable=g-import-not-at-top

    return normalizers.BertNormalizer(
        clean_text=True,
        handle_chinese_chars=True,
        strip_accents=bool(lowercase),
        lowercase=False,
    )


class BertNormalizer:
    """The text normalisation of TF-Text's BERT tokenizers, as a callable.

    `tokenizers`' `BertNormalizer` drops control characters, maps whitespace
    to spaces and puts spaces around CJK characters. With `lowercase`,
    TF-Text (`FastBertTokenizer(lower_case_nfd_strip_accents=True)`, like
    `BertTokenizer(lower_case=True)`) applies NFKC case folding before
    stripping accents ("½" -> "1⁄2", "ß" -> "ss", "ﬁ" -> "fi"), which plain
    lowercasing does not; Python's NFKC and `str.casefold` do it first.

    Args:
      lowercase: case-fold and strip accents.

    Example:
    >>> BertNormalizer(lowercase=True)("Straße ½")
    'strasse 1⁄2'
    """

    def __init__(self, lowercase):
        self.lowercase = bool(lowercase)
        self._bert = _bert_normalizer(lowercase)

    def __call__(self, text):
        if self.lowercase:
            text = unicodedata.normalize("NFKC", text).casefold()
        return self._bert.normalize_str(text)


def split_words(text, normalizer):
    """Normalised words of `text`, split like BERT's basic tokenizer.

    Args:
      text: a `str`.
      normalizer: a `BertNormalizer`.

    Returns:
      A list of words.
    """
    return _WORD_RE.findall(normalizer(text))


def most_frequent(word_counts, max_words):
    """The `max_words` most frequent `(word, count)` pairs (ties: word)."""
    return heapq.nsmallest(
        max_words, word_counts, key=lambda wc: (-wc[1], wc[0])
    )


def count_words(lines, lowercase, counts=None, max_words=None):
    """Counts words the way BERT's basic tokenizer splits them.

    Text is normalised by `BertNormalizer` (a batch at a time) and split by
    a regular expression equivalent to `tokenizers`' `BertPreTokenizer` (a
    test checks both give the same words).

    Args:
      lines: iterable of `str` lines, or of lists of lines (batches).
      lowercase: lowercase and strip accents.
      counts: optional `collections.Counter` to update.
      max_words: when the table holds more than twice this many words, it
        is cut back to the `max_words` most frequent (`None`: never), so
        memory stays bounded; counts are exact until the first cut.

    Returns:
      A `collections.Counter` word -> count.

    Example:
    >>> count_words(["Don't stop."], lowercase=True)["don"]
    1
    """
    normalizer = BertNormalizer(lowercase)
    counts = counts if counts is not None else collections.Counter()
    for item in lines:
        text = item if isinstance(item, str) else "\n".join(item)
        if text:
            counts.update(split_words(text, normalizer))
            if max_words and len(counts) > 2 * max_words:
                kept = most_frequent(counts.items(), max_words)
                counts.clear()
                counts.update(dict(kept))
    return counts


def _alphabet(word_counts):
    """The `MAX_ALPHABET` most frequent characters (ties: code point)."""
    chars = set()
    for word, _ in word_counts:
        chars.update(word)
    if len(chars) <= MAX_ALPHABET:
        return sorted(chars)
    char_counts = collections.Counter()
    for word, count in word_counts:
        for char in word:
            char_counts[char] += count
    ranked = sorted(char_counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return sorted(char for char, _ in ranked[:MAX_ALPHABET])


def _replayed(word_counts):
    """Text whose words, split on spaces, have exactly `word_counts`."""
    for word, count in word_counts:
        per_chunk = max(1, _REPLAY_CHUNK_CHARS // (len(word) + 1))
        while count > 0:
            n = min(count, per_chunk)
            yield " ".join([word] * n)
            count -= n


def learnable_word_counts(word_counts, max_words=None):
    """The `(word, count)` pairs the learner uses, sorted: non-empty words
    of at most `MAX_WORD_BYTES` UTF-8 bytes with a positive count, the
    `max_words` most frequent of them (`None`: all).

    Args:
      word_counts: mapping or iterable of `(word, count)`.
      max_words: see `MAX_WORDS_HELP`.
    """
    if isinstance(word_counts, collections.abc.Mapping):
        word_counts = word_counts.items()
    kept = [
        (w, c)
        for w, c in word_counts
        if w and c > 0 and len(w.encode("utf-8")) <= MAX_WORD_BYTES
    ]
    if max_words and len(kept) > max_words:
        kept = most_frequent(kept, max_words)
    kept.sort()
    return kept


def learn_from_word_counts(
    word_counts, vocab_size, reserved_tokens, max_words=DEFAULT_MAX_WORDS
):
    """Learns a WordPiece vocabulary from word counts, deterministically.

    Like TF-Text's learner, words longer than `MAX_WORD_BYTES` are left out
    (`learnable_word_counts`), the alphabet is the `MAX_ALPHABET` most
    frequent characters and words with other characters are left out; every
    character gets both forms `c` and `##c`. The `tokenizers` WordPiece
    trainer only keeps per-word counts of its input, so the counted words
    are replayed to it `count` times each (time linear in the corpus' word
    count, in Rust). Its ties between equally frequent pairs are broken by
    token id, and the ids of `##c` depend on hash-map order unless fixed in
    advance: they are registered, sorted, right after the reserved tokens,
    so the same counts always give the same vocabulary.

    Args:
      word_counts: mapping or iterable of `(word, count)`, words as returned
        by `count_words` (order does not matter).
      vocab_size: upper bound of the vocabulary size.
      reserved_tokens: tokens placed first, in order.
      max_words: learn from the `max_words` most frequent words only
        (`None`: all).

    Returns:
      The list of tokens, in id order: reserved tokens, the alphabet
      (`c`, `##c`, sorted), then the learned pieces in learning order.

    Raises:
      UserError: there are no words (of at most `MAX_WORD_BYTES`), or
        `vocab_size` leaves no room for the alphabet.

    Example:
    >>> learn_from_word_counts({"the": 3, "cat": 2}, 30,
    ...     ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])[:7]
    ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', 'a', '##a']
    """
    from tokenizers import Tokenizer  # pylint: disable=g-import-not-at-top
    from tokenizers import models  # pylint: disable=g-import-not-at-top
    from tokenizers import pre_tokenizers  # pylint: disable=g-import-not-at-top
    from tokenizers import trainers  # pylint: disable=g-import-not-at-top

    word_counts = learnable_word_counts(word_counts, max_words)
    if not word_counts:
        raise UserError(
            "No words to learn a vocabulary from (words of more than "
            f"{MAX_WORD_BYTES} bytes are left out)."
        )
    chars = _alphabet(word_counts)
    allowed = set(chars)
    word_counts = [(w, c) for w, c in word_counts if allowed.issuperset(w)]
    reserved = list(reserved_tokens)
    alphabet = [form for c in chars for form in (c, _CONTINUATION + c)]
    room = vocab_size - len(reserved) - len(alphabet)
    if room < 0:
        raise UserError(
            f"vocab_size {vocab_size} is too small for the "
            f"{len(reserved)} reserved tokens and the {len(alphabet)} "
            "character tokens (each character as `c` and `##c`): pass a "
            "larger --vocab_size."
        )
    continuation_forms = [_CONTINUATION + c for c in chars]
    tokenizer = Tokenizer(
        models.WordPiece(
            unk_token="[UNK]", continuing_subword_prefix=_CONTINUATION
        )
    )
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size,
        min_frequency=0,
        show_progress=False,
        special_tokens=reserved + continuation_forms,
        continuing_subword_prefix=_CONTINUATION,
    )
    tokenizer.train_from_iterator(_replayed(word_counts), trainer)
    vocab = tokenizer.get_vocab()
    known = set(reserved) | set(alphabet)
    pieces = [t for t in sorted(vocab, key=vocab.get) if t not in known]
    return reserved + alphabet + pieces[:room]


def learn_from_lines(
    lines, vocab_size, lowercase, reserved_tokens, max_words=DEFAULT_MAX_WORDS
):
    """`count_words` then `learn_from_word_counts` (the single-process path).

    Example:
    >>> learn_from_lines(["the cat sat"] * 3, 40, True,
    ...     ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])[:2]
    ['[PAD]', '[UNK]']
    """
    return learn_from_word_counts(
        count_words(lines, lowercase, max_words=max_words),
        vocab_size,
        reserved_tokens,
        max_words,
    )


def count_file_words(
    input_files,
    lowercase,
    stats=None,
    line_batch_size=1024,
    text_input=None,
    max_words=DEFAULT_MAX_WORDS,
):
    """`count_words` over text files read by `corpus.text_line_batches`.

    Args:
      input_files: list of paths (see `corpus.resolve_input_files`).
      lowercase: lowercase and strip accents.
      stats: optional `corpus.CorpusStats` to update.
      line_batch_size: lines read at once.
      text_input: optional `corpus.TextInputSettings` (refuse what is not
        text).
      max_words: see `count_words`.

    Returns:
      A `collections.Counter` word -> count.
    """
    batches = corpus.text_line_batches(
        input_files,
        stats=stats,
        batch_size=line_batch_size,
        text_input=text_input,
    )
    return count_words(text_chunks(batches), lowercase, max_words=max_words)


# Most text normalised at once: `tokenizers` keeps alignments (16 bytes a
# character) next to the text, so a 50 MB line normalised whole took 3 GB.
_NORMALIZE_CHUNK_BYTES = 1 << 20


def text_chunks(line_batches, max_bytes=_NORMALIZE_CHUNK_BYTES):
    """The lines of `(lines, kinds)` batches as `str`s of about `max_bytes`.

    Lines (sanitized UTF-8 bytes, pieces of long lines included) are joined
    by newlines; a word never spans two lines, so `count_words` counts the
    same whatever the chunking.

    Yields:
      `str`s of whole lines, each at most `max_bytes` unless one line is
      longer (`corpus` cuts lines into pieces of 256 KiB).
    """
    chunk, size = [], 0
    for lines, _ in line_batches:
        for line in lines:
            if chunk and size + len(line) > max_bytes:
                yield b"\n".join(chunk).decode("utf-8")
                chunk, size = [], 0
            chunk.append(line)
            size += len(line) + 1
    if chunk:
        yield b"\n".join(chunk).decode("utf-8")


def learn_from_files(
    input_files,
    vocab_size,
    lowercase,
    reserved_tokens,
    stats=None,
    line_batch_size=1024,
    text_input=None,
    max_words=DEFAULT_MAX_WORDS,
):
    """Learns the vocabulary of text files; `None` if they hold no words
    (of at most `MAX_WORD_BYTES`).

    Example:
    >>> learn_from_files(["corpus.txt"], 30522, True,
    ...     ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])  # doctest: +SKIP
    """
    counts = count_file_words(
        input_files, lowercase, stats, line_batch_size, text_input, max_words
    )
    if not learnable_word_counts(counts):
        return None
    return learn_from_word_counts(
        counts, vocab_size, reserved_tokens, max_words
    )
