"""WordPiece vocabulary: learning (`wordpiece_learner` or TF-Text), loading,
special tokens."""

import dataclasses
import os
import re
from typing import Optional

from data_pipeline import beam_common
from data_pipeline import corpus
from data_pipeline import wordpiece_learner
from tupe_tf.utils import fileio
from tupe_tf.utils.errors import UserError
from tupe_tf.utils.keyword_arguments import refuses_unknown_fields
from tupe_tf.utils.settings import at_least
from tupe_tf.utils.settings import refuse_ignored
from tupe_tf.utils.settings import setting

RESERVED_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def fast_bert_tokenizer(tokens, lowercase, token_out_type="int32"):
    """TF-Text's `FastBertTokenizer` as this package builds its vocabularies.

    `##` continuations, `[UNK]` for unknown words, and lowercasing with
    accent stripping when the vocabulary was learned with `lowercase`.

    Args:
        tokens: the vocabulary, a list of strings (reserved tokens first).
        lowercase: bool. Lowercase and strip accents.
        token_out_type: `"int32"` for ids, `"string"` for word pieces.
    """
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    import tensorflow_text as tf_text  # pylint: disable=g-import-not-at-top

    return tf_text.FastBertTokenizer(
        vocab=list(tokens),
        suffix_indicator="##",
        token_out_type=tf.as_dtype(token_out_type),
        unknown_token="[UNK]",
        lower_case_nfd_strip_accents=bool(lowercase),
    )


REQUIRED_SPECIAL_TOKENS = RESERVED_TOKENS
# A larger file is not a vocabulary (BERT's 30522 tokens take 230 KB); it is
# refused before it is read, e.g. a corpus passed as --vocab_file.
MAX_VOCAB_FILE_BYTES = 64 << 20
_NOT_A_VOCABULARY = "a vocabulary has one token per line"

# Tokens such as "[PAD]" or "[unused3]": never chosen as random replacements.
_SPECIAL_TOKEN_RE = re.compile(r"^\[[A-Za-z0-9_]+\]$")


@dataclasses.dataclass(frozen=True)
class SpecialTokenIds:
    """Ids of the special tokens, looked up from a vocabulary file."""

    pad: int
    unk: int
    cls: int
    sep: int
    mask: int


@dataclasses.dataclass(frozen=True)
class Vocabulary:
    """A loaded WordPiece vocabulary.

    Attributes:
      path: the vocabulary file.
      tokens: the tokens, one per id.
      sha256: hex digest of the file's bytes (what manifests record).
      special_ids: `SpecialTokenIds`.
      special_token_ids: ids of every bracketed special token (`[PAD]`,
        `[unused0]`, ...); random MLM replacements never use them.
    """

    path: str
    tokens: tuple
    sha256: str
    special_ids: SpecialTokenIds
    special_token_ids: tuple

    @property
    def size(self):
        return len(self.tokens)


def load_vocabulary(vocab_file):
    """Loads a vocabulary file (one token per line) and checks its specials.

    Args:
      vocab_file: path of a WordPiece vocabulary, one token per line.

    Returns:
      A `Vocabulary`.

    Raises:
      fileio.NoMatchingFileError (a `UserError` and `FileNotFoundError`):
        the file does not exist.
      UserError: it cannot be read, is a directory, larger than
        `MAX_VOCAB_FILE_BYTES`, empty, not UTF-8 text (or holds NUL bytes),
        has an empty or duplicate token or misses one of
        `[PAD] [UNK] [CLS] [SEP] [MASK]`.

    Example:
    >>> vocab = load_vocabulary("vocab.txt")  # doctest: +SKIP
    >>> vocab.special_ids.mask  # doctest: +SKIP
    4
    """
    vocab_file = os.fspath(vocab_file)
    raw = _read_vocabulary_file(vocab_file)
    tokens = _vocabulary_tokens(vocab_file, raw)
    index = _token_index(vocab_file, tokens)
    special_ids = SpecialTokenIds(
        pad=index["[PAD]"],
        unk=index["[UNK]"],
        cls=index["[CLS]"],
        sep=index["[SEP]"],
        mask=index["[MASK]"],
    )
    special_token_ids = tuple(
        i for i, t in enumerate(tokens) if _SPECIAL_TOKEN_RE.match(t)
    )
    return Vocabulary(
        path=vocab_file,
        tokens=tuple(tokens),
        sha256=fileio.sha256_hex(raw),
        special_ids=special_ids,
        special_token_ids=special_token_ids,
    )


def as_vocabulary(vocabulary):
    """`vocabulary` itself when it is a `Vocabulary`, else the one of the
    file it names (`load_vocabulary`): a caller that has read its
    vocabulary passes it on instead of having it read again.

    Example:
    >>> vocab = as_vocabulary("vocab.txt")  # doctest: +SKIP
    >>> as_vocabulary(vocab) is vocab  # doctest: +SKIP
    True
    """
    if isinstance(vocabulary, Vocabulary):
        return vocabulary
    return load_vocabulary(vocabulary)


def _read_vocabulary_file(vocab_file):
    """The bytes of `vocab_file`, refused if it is no file or too large to
    be a vocabulary."""
    if os.path.isdir(vocab_file):
        raise UserError(
            f"Vocabulary file {vocab_file} is a directory; "
            f"{_NOT_A_VOCABULARY} (e.g. the output of build_vocab.py)."
        )
    if not os.path.isfile(vocab_file):
        raise fileio.NoMatchingFileError(
            f"Vocabulary file not found: {vocab_file}"
        )
    size = os.path.getsize(vocab_file)
    if size > MAX_VOCAB_FILE_BYTES:
        raise UserError(
            f"Vocabulary file {vocab_file} is {size / 2**20:.0f} MiB, not a "
            f"vocabulary (at most {MAX_VOCAB_FILE_BYTES >> 20} MiB; "
            f"{_NOT_A_VOCABULARY}): is it the corpus?"
        )
    try:
        with open(vocab_file, "rb") as f:
            return f.read()
    except OSError as e:
        raise UserError(
            f"Vocabulary file {vocab_file} cannot be read: {e.strerror or e}."
        ) from e


def _vocabulary_tokens(vocab_file, raw):
    """The lines of a vocabulary file's bytes, refused unless UTF-8 text."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserError(
            f"Vocabulary file {vocab_file} is not UTF-8 text (byte "
            f"{e.start}: {e.reason}); {_NOT_A_VOCABULARY}."
        ) from e
    if "\0" in text:
        raise UserError(
            f"Vocabulary file {vocab_file} holds NUL bytes (binary data); "
            f"{_NOT_A_VOCABULARY}."
        )
    tokens = text.split("\n")
    if tokens and tokens[-1] == "":
        tokens.pop()
    return [t.rstrip("\r") for t in tokens]


def _token_index(vocab_file, tokens):
    """`{token: id}`, refused for no token, an empty or duplicate token, or
    a missing required special token."""
    if not tokens:
        raise UserError(
            f"Vocabulary file {vocab_file} is empty; {_NOT_A_VOCABULARY}."
        )
    index = {}
    for i, token in enumerate(tokens):
        if not token:
            raise UserError(
                f"Vocabulary file {vocab_file} has an empty line (line "
                f"{i + 1}); {_NOT_A_VOCABULARY}."
            )
        if token in index:
            raise UserError(
                f"Vocabulary file {vocab_file} has duplicate token {token!r} "
                f"(lines {index[token] + 1} and {i + 1})."
            )
        index[token] = i
    missing = [t for t in REQUIRED_SPECIAL_TOKENS if t not in index]
    if missing:
        raise UserError(
            f"Vocabulary file {vocab_file} is missing required special token(s) "
            f"{', '.join(missing)}; a BERT vocabulary needs all of "
            f"{' '.join(REQUIRED_SPECIAL_TOKENS)}."
        )
    return index


def check_vocab_size(vocab_size, reserved_tokens=RESERVED_TOKENS):
    """Raises `UserError` unless `vocab_size` exceeds the reserved tokens."""
    if not isinstance(vocab_size, int) or vocab_size <= len(reserved_tokens):
        raise UserError(
            f"vocab_size must be an int larger than the {len(reserved_tokens)} "
            f"reserved tokens, got {vocab_size!r}."
        )


def no_words_error(input_files, nonblank_lines):
    """The error of a corpus the learner finds no word in."""
    if not nonblank_lines:
        return corpus.empty_corpus_error(input_files)
    return corpus.empty_corpus_error(
        input_files,
        f"word of at most {wordpiece_learner.MAX_WORD_BYTES} bytes (the "
        "tokenizer makes a longer word one [UNK])",
    )


def check_output_file(output_file):
    """Refuses an `--output` that is a directory (before any learning)."""
    if os.path.isdir(output_file):
        raise UserError(
            f"--output: {output_file} is a directory; give the path of the "
            "vocabulary file to write."
        )


@refuses_unknown_fields
@dataclasses.dataclass
class VocabConfig(beam_common.BeamSettings, corpus.TextInputSettings):
    """Settings of `scripts/build_vocab.py`, whose flags are generated from
    it (help: field metadata; see `config_flags`)."""

    input_patterns: Optional[str] = setting(
        None,
        help="Comma-separated text files or globs (.txt, .gz, .bz2), one "
        "sentence or paragraph per line, blank line between documents. "
        "Default: the embedded gensim Wikipedia sample.",
        flag="input",
    )
    vocab_size: int = setting(
        30522,
        help="Target vocabulary size (upper bound).",
        valid=at_least(len(RESERVED_TOKENS) + 1),
    )
    output_file: str = setting(
        "", help="Vocabulary file to write.", flag="output", required=True
    )
    lowercase: bool = setting(False, help="Lowercase and strip accents.")
    num_iterations: int = setting(
        4,
        help="--learner=tf_text only: WordPiece learning iterations "
        "(TF-Text `learn`).",
        valid=at_least(1),
    )
    learner: str = setting(
        wordpiece_learner.DEFAULT_LEARNER,
        help=wordpiece_learner.LEARNER_HELP,
        choices=wordpiece_learner.LEARNERS,
    )
    max_words: int = setting(
        wordpiece_learner.DEFAULT_MAX_WORDS,
        help=wordpiece_learner.MAX_WORDS_HELP,
        valid=at_least(1),
    )

    def check_rules(self):
        self.refuse_unused_beam_settings()
        refuse_ignored(
            self,
            ("num_iterations",),
            self.learner == wordpiece_learner.LEARNER_TF_TEXT,
            "with --learner=tf_text",
        )
        refuse_ignored(
            self,
            ("max_words",),
            self.learner == wordpiece_learner.LEARNER_TOKENIZERS,
            "with --learner=tokenizers",
        )
        if self.runner and self.learner != wordpiece_learner.LEARNER_TOKENIZERS:
            raise UserError(
                "--runner: Beam pipelines learn with the 'tokenizers' learner; "
                f"got learner={self.learner!r}."
            )

    def learning_arguments(self):
        """The arguments of `build_vocabulary` and
        `beam_vocab.build_vocabulary_beam` this config sets; they validate
        it as their `text_input`, before their other checks."""
        return dict(
            input_patterns=self.input_patterns,
            vocab_size=self.vocab_size,
            output_file=self.output_file,
            lowercase=self.lowercase,
            text_input=self,
            max_words=self.max_words,
        )

    def build(self):
        """Learns the vocabulary on this machine; returns its summary.

        With `runner` set, `data_pipeline.beam_vocab.build_from_config`
        learns it on Apache Beam instead (`scripts/build_vocab.py` chooses).
        """
        return build_vocabulary(
            **self.learning_arguments(),
            learn_params={"num_iterations": self.num_iterations},
            learner=self.learner,
        )


def build_vocabulary(
    input_patterns,
    vocab_size,
    output_file,
    lowercase=False,
    reserved_tokens=RESERVED_TOKENS,
    learn_params=None,
    line_batch_size=1024,
    learner=None,
    text_input=None,
    max_words=wordpiece_learner.DEFAULT_MAX_WORDS,
):
    """Learns a WordPiece vocabulary and writes it atomically.

    The text is streamed (sanitized to UTF-8, see `corpus.text_line_batches`)
    into one of two learners, both splitting words like BERT's basic
    tokenizer:
    - `"tokenizers"` (default): `wordpiece_learner` counts the words and
      learns on the counts with the `tokenizers` library's Rust trainer.
    - `"tf_text"`: through `tf.data` into
      `tensorflow_text.tools.wordpiece_vocab.bert_vocab_from_dataset`.
    Reserved tokens come first, so `[PAD]`=0, `[UNK]`=1, `[CLS]`=2,
    `[SEP]`=3, `[MASK]`=4 with the default `reserved_tokens`.

    Args:
      input_patterns: comma-separated string or list of files/globs of text
        (`.txt`, `.gz`, `.bz2`); `None` uses the embedded gensim Wikipedia
        sample (`corpus.embedded_corpus_path()`).
      vocab_size: target vocabulary size (an upper bound).
      output_file: where to write the vocabulary, one token per line.
      lowercase: lowercase and strip accents before learning.
      reserved_tokens: tokens placed first in the vocabulary.
      learn_params: `tf_text` only: extra keyword arguments for TF-Text's
        `wordpiece_tokenizer_learner_lib.learn`.
      line_batch_size: lines per tokenization batch.
      learner: one of `wordpiece_learner.LEARNERS`; `None` for
        `wordpiece_learner.DEFAULT_LEARNER`.
      text_input: `corpus.TextInputSettings` (what is refused as not text);
        `None` for the defaults.
      max_words: `tokenizers` only: see `wordpiece_learner.MAX_WORDS_HELP`.

    Returns:
      A dict with `vocab_size` (actual), `output_file`, `sha256`, `input_files`,
      `learner` and `corpus_stats`.

    Raises:
      UserError: a bad `vocab_size` or `learner`, missing reserved tokens,
        an `output_file` that is a directory; empty, binary, unreadable or
        undecodable input (nothing is written).
      fileio.NoMatchingFileError (a `UserError`): a missing input file.
      fileio.OutputError (a `UserError`): the directory of `output_file`
        cannot be created or written (checked before learning).

    Example:
    >>> build_vocabulary("corpus/*.txt", 30522, "vocab.txt", lowercase=True)  # doctest: +SKIP
    """
    learner = learner or wordpiece_learner.DEFAULT_LEARNER
    if text_input is None:
        text_input = corpus.TextInputSettings()
    output_file = os.fspath(output_file)
    _check_arguments(
        learner, vocab_size, reserved_tokens, text_input, output_file
    )
    input_files = corpus.resolve_input_files(
        input_patterns, text_input=text_input
    )
    output_dir = os.path.dirname(os.path.abspath(output_file))
    with fileio.made_directory(output_dir, "--output"):
        stats = corpus.CorpusStats()
        if learner == wordpiece_learner.LEARNER_TOKENIZERS:
            vocab = wordpiece_learner.learn_from_files(
                input_files,
                vocab_size,
                lowercase,
                reserved_tokens,
                stats=stats,
                line_batch_size=line_batch_size,
                text_input=text_input,
                max_words=max_words,
            )
        else:
            vocab = _learn_with_tf_text(
                input_files,
                vocab_size,
                lowercase,
                reserved_tokens,
                stats=stats,
                learn_params=learn_params,
                line_batch_size=line_batch_size,
                text_input=text_input,
            )
        _check_learned(vocab, reserved_tokens, input_files, stats)
        fileio.write_text_atomically(
            output_file, "".join(t + "\n" for t in vocab)
        )
    return {
        "vocab_size": len(vocab),
        "output_file": os.fspath(output_file),
        "sha256": fileio.file_sha256(output_file),
        "input_files": list(input_files),
        "lowercase": bool(lowercase),
        "learner": learner,
        "corpus_stats": dataclasses.asdict(stats),
    }


def _check_arguments(
    learner, vocab_size, reserved_tokens, text_input, output_file
):
    """`build_vocabulary`'s checks before it reads anything: `text_input`
    first (a `VocabConfig` is validated there, its flags named)."""
    text_input.validate()
    if learner not in wordpiece_learner.LEARNERS:
        raise UserError(
            f"learner must be one of {', '.join(wordpiece_learner.LEARNERS)}, "
            f"got {learner!r}."
        )
    check_vocab_size(vocab_size, reserved_tokens)
    missing = [t for t in REQUIRED_SPECIAL_TOKENS if t not in reserved_tokens]
    if missing:
        raise UserError(f"reserved_tokens is missing {', '.join(missing)}.")
    check_output_file(output_file)


def _check_learned(vocab, reserved_tokens, input_files, stats):
    """Refuses a corpus the learner found no word in; asserts the reserved
    tokens come first."""
    if (
        stats.nonblank_lines == 0
        or not vocab
        or len(vocab) <= len(reserved_tokens)
    ):
        raise no_words_error(input_files, stats.nonblank_lines)
    if list(vocab[: len(reserved_tokens)]) != list(reserved_tokens):
        raise AssertionError(
            "The learner did not put the reserved tokens first."
        )


def _learn_with_tf_text(
    input_files,
    vocab_size,
    lowercase,
    reserved_tokens,
    stats,
    learn_params,
    line_batch_size,
    text_input=None,
):
    """TF-Text's `bert_vocab_from_dataset`; `None` when there are no words."""
    # Heavy imports stay local so that `import data_pipeline` is cheap.
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    from tensorflow_text.tools.wordpiece_vocab import (
        bert_vocab_from_dataset as bvd,
    )  # pylint: disable=g-import-not-at-top

    def batches():
        for lines, _ in corpus.text_line_batches(
            input_files,
            stats=stats,
            batch_size=line_batch_size,
            text_input=text_input,
        ):
            # Blank lines carry no words; skip them here.
            nonblank = [line for line in lines if line]
            if nonblank:
                yield nonblank

    errors = corpus.GeneratorErrors()
    dataset = tf.data.Dataset.from_generator(
        errors.wrap(batches), output_signature=tf.TensorSpec([None], tf.string)
    )
    bert_tokenizer_params = {"lower_case": bool(lowercase)}
    try:
        with errors.reraise():
            vocab = bvd.bert_vocab_from_dataset(
                dataset.prefetch(4),
                vocab_size=vocab_size,
                reserved_tokens=list(reserved_tokens),
                bert_tokenizer_params=bert_tokenizer_params,
                learn_params=dict(learn_params or {}),
            )
    except StopIteration:
        return None  # count_words() raises StopIteration on no words at all.
    return vocab
