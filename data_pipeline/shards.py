"""Building MLM pre-training TFRecord shards from raw text.

Pipeline (streaming; memory does not grow with the corpus):

  text files --(corpus.text_line_batches: Python file reading, UTF-8 check)-->
  batches of lines --(tf.data parallel map: tensorflow_text.FastBertTokenizer)
  --> ragged ids --(packing.FullSentencesPacker)--> [CLS] ... [SEP] sequences
  --> padded chunks --(TensorFlow: optional static masking, batched
  tf.train.Example serialization with tf.io.encode_proto)--> K TFRecord shards
  (round-robin), written under temporary names, renamed, manifest last.
"""

import collections
import concurrent.futures
import dataclasses
import functools
import os
import shutil
import time
from typing import Optional

import numpy as np
from absl import logging

from data_pipeline import beam_common
from data_pipeline import corpus
from data_pipeline import dataset_options
from data_pipeline import example_encoding
from data_pipeline import manifest as manifest_lib
from data_pipeline import masking
from data_pipeline import packing
from data_pipeline import vocab as vocab_lib
from tupe_tf.utils import fileio
from tupe_tf.utils.config_flags import setting
from tupe_tf.utils.errors import UserError
from tupe_tf.utils.keyword_arguments import refuses_unknown_fields

_COMPRESSIONS = {None: "", "": "", "none": "", "gzip": "GZIP"}
# `manifest["engine"]` of shards built by `build_shards` in one process.
ENGINE_SINGLE_PROCESS = "single_process"
# Longest `max_seq_length`: sequences are padded to it a chunk of 1024 at a
# time (32 MiB of int32 at this length).
MAX_SEQ_LENGTH = 8192
DEFAULT_MAX_UNK_FRACTION = 0.05
# File descriptors kept free for TensorFlow and Python besides the shards.
_SPARE_FILE_DESCRIPTORS = 128
# Work directory of a Beam run inside `output_dir` (see `beam_shards`).
BEAM_WORK_DIR_PREFIX = ".beam-shards-"


def _open_file_limit():
    """The soft limit on open files (`ulimit -n`), or `None` if unknown."""
    try:
        import resource  # pylint: disable=g-import-not-at-top

        limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        return None
    return limit if limit > 0 else None


@refuses_unknown_fields
@dataclasses.dataclass
class ShardConfig(beam_common.BeamSettings, corpus.TextInputSettings):
    """Configuration of `build_shards`; `scripts/build_shards.py`'s flags are
    generated from it (help: field metadata; see `config_flags`)."""

    input_patterns: Optional[object] = setting(
        None,
        help="Comma-separated text files or globs (.txt, .gz, .bz2), or a "
        "list; one sentence or paragraph per line, blank line between "
        "documents. Default: the embedded gensim Wikipedia sample.",
        flag="input",
        value_type=str,
    )
    vocab_file: str = setting(
        "", help="WordPiece vocabulary (one token per line).", required=True
    )
    output_dir: str = setting(
        "", help="Directory for the shards and manifest.json.", required=True
    )
    max_seq_length: int = setting(
        128,
        help="Longest sequence, [CLS] and [SEP] included (8 to "
        f"{MAX_SEQ_LENGTH}).",
    )
    num_shards: int = setting(
        8, help="Number of TFRecord files; examples go round-robin."
    )
    seed: int = setting(
        12345,
        help="Seed of static masking (packing itself is deterministic).",
    )
    static_masking: bool = setting(
        False,
        help="Write pre-masked examples in TF Model Garden's schema instead "
        "of input_word_ids for dynamic masking.",
    )
    dupe_factor: int = setting(
        1, help="With --static_masking: masked copies per sequence."
    )
    max_predictions_per_seq: int = setting(
        20, help="With --static_masking: masked positions."
    )
    mask_rate: float = setting(
        0.15, help="With --static_masking: masked fraction."
    )
    lowercase: bool = setting(
        False, help="Lowercase and strip accents (match the vocabulary)."
    )
    compression: Optional[str] = setting(
        "none", help="TFRecord compression.", choices=("none", "gzip")
    )
    overwrite: bool = setting(
        False, help="Replace the shards of an existing --output_dir."
    )
    max_unk_fraction: float = setting(
        DEFAULT_MAX_UNK_FRACTION,
        help="Refuse the corpus, writing nothing, when more than this share "
        "of its tokens are [UNK] (a vocabulary or --lowercase that does not "
        "match the text, another language, binary input); 1 accepts any.",
    )
    line_batch_size: int = setting(
        1024, help="Lines per tokenizer call.", flag=False
    )
    num_parallel_calls: Optional[int] = setting(
        None, help="Tokenizer parallelism (None: one per core).", flag=False
    )
    file_prefix: str = setting(
        "pretrain", help="Shard file name prefix.", flag=False
    )

    def validate(self):
        """Raises ValueError naming the first bad field."""

        def bad(field, message):
            raise ValueError(
                f"{field}: {message} (got {getattr(self, field)!r})."
            )

        if not self.vocab_file:
            bad("vocab_file", "a vocabulary file is required")
        if not self.output_dir:
            bad("output_dir", "an output directory is required")
        if not isinstance(self.max_seq_length, int) or not (
            8 <= self.max_seq_length <= MAX_SEQ_LENGTH
        ):
            bad("max_seq_length", f"must be an int in [8, {MAX_SEQ_LENGTH}]")
        if not isinstance(self.num_shards, int) or self.num_shards < 1:
            bad("num_shards", "must be an int >= 1")
        open_at_once = self.num_shards
        if self.runner and isinstance(self.num_partitions, int):
            open_at_once = -(-self.num_shards // max(1, self.num_partitions))
        limit = _open_file_limit()
        if limit is not None and open_at_once + _SPARE_FILE_DESCRIPTORS > limit:
            bad(
                "num_shards",
                f"{open_at_once} shard files would be open at once, but this "
                f"process may open only {limit} files (ulimit -n); use "
                "fewer shards or raise the limit",
            )
        if not isinstance(self.max_unk_fraction, (int, float)) or not (
            0 <= self.max_unk_fraction <= 1
        ):
            bad("max_unk_fraction", "must be in [0, 1]")
        self.check_text_input_settings()
        if not isinstance(self.dupe_factor, int) or self.dupe_factor < 1:
            bad("dupe_factor", "must be an int >= 1")
        if self.dupe_factor > 1 and not self.static_masking:
            bad(
                "dupe_factor",
                "only applies with --static_masking (dynamic masking "
                "draws new masks every epoch)",
            )
        if not 0.0 < self.mask_rate < 1.0:
            bad("mask_rate", "must be in (0, 1)")
        if self.static_masking and not (
            1 <= self.max_predictions_per_seq <= self.max_seq_length
        ):
            bad("max_predictions_per_seq", "must be in [1, max_seq_length]")
        if (
            self.compression.lower()
            if isinstance(self.compression, str)
            else self.compression
        ) not in _COMPRESSIONS:
            bad("compression", "must be empty, 'none' or 'gzip'")
        if (
            not isinstance(self.line_batch_size, int)
            or self.line_batch_size < 1
        ):
            bad("line_batch_size", "must be an int >= 1")
        if not isinstance(self.num_partitions, int) or not (
            1 <= self.num_partitions
            and (not self.runner or self.num_partitions <= self.num_shards)
        ):
            bad(
                "num_partitions",
                "must be an int >= 1, and <= num_shards with a runner (each "
                "partition writes its own shards)",
            )

    @property
    def tf_compression(self):
        key = (
            self.compression.lower()
            if isinstance(self.compression, str)
            else self.compression
        )
        return _COMPRESSIONS[key]


def shard_names(prefix, num_shards, compression):
    suffix = ".tfrecord" + (".gz" if compression == "GZIP" else "")
    return [
        f"{prefix}-{i:05d}-of-{num_shards:05d}{suffix}"
        for i in range(num_shards)
    ]


def tokenized_line_batches(
    input_files,
    vocabulary,
    lowercase,
    stats,
    line_batch_size=1024,
    num_parallel_calls=None,
    line_batches=None,
    text_input=None,
):
    """Tokenizes text files with TF-Text inside `tf.data`.

    Args:
      input_files: list of text files.
      vocabulary: a `vocab.Vocabulary`.
      lowercase: lowercase and strip accents (FastBertTokenizer's
        `lower_case_nfd_strip_accents`).
      stats: `corpus.CorpusStats` to update.
      line_batch_size: lines per tokenizer call.
      num_parallel_calls: parallel tokenizer calls (`None`: one per core).
      line_batches: optional iterable of `(lines, kinds)` to tokenize instead
        of reading `input_files` (e.g. one partition of the documents).
      text_input: `corpus.TextInputSettings` applied while `input_files` are
        read (not to `line_batches`), or `None`.

    Returns:
      An iterator of numpy `(flat_ids int32, row_splits int64, kinds int8)`, in
      input order (the parallel map is deterministic). What reading the text
      raises (e.g. `UserError`) comes out of it as itself, not as a
      TensorFlow error.
    """
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    tokenizer = vocab_lib.fast_bert_tokenizer(vocabulary.tokens, lowercase)

    def generate():
        batches = line_batches
        if batches is None:
            batches = corpus.text_line_batches(
                input_files,
                stats=stats,
                batch_size=line_batch_size,
                text_input=text_input,
            )
        for lines, kinds in batches:
            yield np.array(lines, dtype=object), np.array(kinds, np.int8)

    # Plain TF ops: skipping AutoGraph's source conversion saves ~1 s start-up.
    @tf.autograph.experimental.do_not_convert
    def tokenize(lines, kinds):
        ids = tokenizer.tokenize(lines)  # ragged [lines, word pieces]
        if ids.shape.rank == 3:  # [lines, words, word pieces] in some versions.
            ids = ids.merge_dims(1, 2)
        return ids.flat_values, ids.row_splits, kinds

    errors = corpus.GeneratorErrors()
    dataset = tf.data.Dataset.from_generator(
        errors.wrap(generate),
        output_signature=(
            tf.TensorSpec([None], tf.string),
            tf.TensorSpec([None], tf.int8),
        ),
    )
    dataset = dataset.map(
        tokenize,
        num_parallel_calls=num_parallel_calls or os.cpu_count() or 2,
        deterministic=True,
    ).prefetch(4)

    def reraising(iterator):
        try:
            with errors.reraise():
                yield from iterator
        finally:
            # Stops tf.data's threads here rather than at interpreter exit.
            del iterator

    return reraising(
        dataset_options.without_autotuning(dataset).as_numpy_iterator()
    )


def _is_leftover(name):
    """A temporary of a run that was killed: a hidden shard or manifest
    temporary, or a Beam work directory."""
    if name.startswith(BEAM_WORK_DIR_PREFIX):
        return True
    return fileio.is_hidden_temporary(name) and (
        ".tfrecord" in name or name.startswith("." + manifest_lib.MANIFEST_NAME)
    )


def check_output_dir(output_dir, overwrite):
    """Refuses an `output_dir` that is a file, or that holds files unless
    `overwrite` (the temporaries of a killed run do not count).

    Does not create it (`build_shards` does, and removes it again if the
    build fails).
    """
    if not os.path.lexists(output_dir):
        return
    if not os.path.isdir(output_dir):
        raise FileExistsError(
            f"--output_dir {output_dir} exists and is not a directory."
        )
    names = sorted(n for n in os.listdir(output_dir) if not _is_leftover(n))
    if names and not overwrite:
        raise FileExistsError(
            f"--output_dir {output_dir} already holds {len(names)} file(s) "
            f"({corpus.describe_files(names)}); pass --overwrite "
            "(ShardConfig.overwrite=True) to replace its shards and manifest, "
            "or choose a new --output_dir."
        )


def remove_previous_outputs(output_dir, keep):
    """Deletes an older run's manifest (first) and shards, and the
    temporaries of killed runs, except the names in `keep`."""
    manifest_path = os.path.join(output_dir, manifest_lib.MANIFEST_NAME)
    if os.path.exists(manifest_path):
        os.remove(manifest_path)
    for name in os.listdir(output_dir):
        if name in keep:
            continue
        path = os.path.join(output_dir, name)
        if name.startswith(BEAM_WORK_DIR_PREFIX):
            shutil.rmtree(path, ignore_errors=True)
        elif _is_leftover(name) or (
            ".tfrecord" in name and not name.startswith(".")
        ):
            os.remove(path)


def check_unk_share(unk_count, text_tokens, config, vocabulary, input_files):
    """Refuses a corpus with more `[UNK]` tokens than `max_unk_fraction`.

    Raises:
      UserError: naming the input, the share and the flag.
    """
    if not text_tokens or unk_count <= config.max_unk_fraction * text_tokens:
        return
    raise UserError(
        f"Input file(s) {corpus.describe_files(input_files)}: "
        f"{100 * unk_count / text_tokens:.1f}% of the {text_tokens} tokens are "
        f"[UNK] with vocabulary {vocabulary.path}, more than "
        f"--max_unk_fraction={config.max_unk_fraction:g}. Is it the "
        "vocabulary of this kind of text, and does --lowercase "
        f"({bool(config.lowercase)}) match how it was learned? Pass "
        "--max_unk_fraction=1 to build anyway."
    )


def preflight(config):
    """What `build_shards` checks before it reads the corpus.

    Validates `config`, loads the vocabulary, resolves the input files and
    sniffs them (`corpus.check_text_files`), and checks `output_dir`
    (`check_output_dir`, and that it can be created and written in; it is
    not left behind). Cheap (no TensorFlow): the script runs it before
    importing TensorFlow.

    Returns:
      `(vocabulary, input_files)`.

    Raises:
      ValueError, FileNotFoundError, FileExistsError: see `build_shards`.
    """
    config.validate()
    vocabulary = vocab_lib.load_vocabulary(config.vocab_file)
    input_files = corpus.resolve_input_files(
        config.input_patterns, text_input=config
    )
    output_dir = os.fspath(config.output_dir)
    check_output_dir(output_dir, config.overwrite)
    fileio.check_can_create_directory(output_dir, "--output_dir")
    return vocabulary, input_files


def build_shards(config):
    """Builds MLM pre-training shards and their manifest from text.

    Tokenization runs in TF-Text (`FastBertTokenizer`) inside a parallel
    `tf.data` map; sequences are FULL-SENTENCES packed (`packing`) and written
    round-robin to `config.num_shards` TFRecord files, under temporary names
    that are renamed only when every shard is complete, `manifest.json` last.
    The same inputs and config give byte-identical shards.

    Input that is not text, or a corpus with too many `[UNK]` tokens, is
    refused (`UserError`) with nothing written: see
    `corpus.TextInputSettings` and `ShardConfig.max_unk_fraction`. A
    refused or failed build leaves `output_dir` as it found it (removed
    again if it created it).

    Args:
      config: a `ShardConfig`.

    Returns:
      The manifest dict (also written to `output_dir/manifest.json`).

    Raises:
      ValueError: bad config field, bad vocabulary; `UserError`:
        empty, binary or undecodable input, too many `[UNK]` tokens.
      FileNotFoundError: a missing input or vocabulary file.
      FileExistsError: `output_dir` not empty and `overwrite` not set.
      fileio.OutputError: `output_dir` cannot be created or written.

    Example:
    >>> build_shards(ShardConfig(input_patterns="wiki/*.txt",
    ...     vocab_file="vocab.txt", output_dir="shards", num_shards=16))  # doctest: +SKIP
    """
    vocabulary, input_files = preflight(config)
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    compression = config.tf_compression
    output_dir = os.fspath(config.output_dir)
    names = shard_names(config.file_prefix, config.num_shards, compression)
    final_paths = [os.path.join(output_dir, n) for n in names]
    options = tf.io.TFRecordOptions(compression_type=compression)
    writers = []
    corpus_stats = corpus.CorpusStats()
    start_time = time.time()
    # The temporaries replace the final shards only if the body succeeds.
    with (
        fileio.made_directory(output_dir, "--output_dir"),
        fileio.atomic_files(final_paths) as tmp_paths,
    ):
        try:
            writers = [tf.io.TFRecordWriter(p, options) for p in tmp_paths]
            token_batches = tokenized_line_batches(
                input_files,
                vocabulary,
                config.lowercase,
                corpus_stats,
                config.line_batch_size,
                config.num_parallel_calls,
                text_input=config,
            )
            counts, unk_count, packer = pack_and_write(
                token_batches, config, vocabulary, writers
            )
            example_index = sum(counts)
            for writer in writers:
                writer.close()
            if example_index == 0:
                raise corpus.empty_corpus_error(input_files)
            check_unk_share(
                unk_count,
                packer.stats.text_tokens,
                config,
                vocabulary,
                input_files,
            )
            shard_entries = []
            for name, tmp_path, count in zip(names, tmp_paths, counts):
                shard_entries.append(
                    {
                        "name": name,
                        "examples": count,
                        "bytes": os.path.getsize(tmp_path),
                        "sha256": fileio.file_sha256(tmp_path),
                    }
                )
            # Every shard is complete: only now drop an older run's files (its
            # manifest first); leaving the `with` renames the new shards, then
            # the manifest is written.
            remove_previous_outputs(
                output_dir, keep={os.path.basename(p) for p in tmp_paths}
            )
        except BaseException:
            for writer in writers:
                try:
                    writer.close()
                except Exception:  # pylint: disable=broad-except
                    pass
            raise
    elapsed = time.time() - start_time

    manifest = shard_manifest(
        config,
        vocabulary,
        input_files,
        shard_entries,
        corpus_stats,
        packer.stats,
        unk_count,
        engine=ENGINE_SINGLE_PROCESS,
        num_partitions=1,
    )
    manifest_lib.write_manifest(output_dir, manifest)
    logging.info(
        "Wrote %d examples in %d shards to %s in %.1f s.",
        sum(counts),
        config.num_shards,
        output_dir,
        elapsed,
    )
    return manifest


def pack_and_write(token_batches, config, vocabulary, writers):
    """Packs tokenized lines and writes their examples round-robin.

    Args:
      token_batches: see `tokenized_line_batches`.
      config: a `ShardConfig`.
      vocabulary: a `vocab.Vocabulary`.
      writers: open `tf.io.TFRecordWriter`s; example `i` goes to
        `writers[i % len(writers)]`.

    Returns:
      `(counts, unk_count, packer)`: examples per writer, `[UNK]` tokens seen
      and the `packing.FullSentencesPacker` (its `stats`).
    """
    special = vocabulary.special_ids
    packer = packing.FullSentencesPacker(
        config.max_seq_length, special.cls, special.sep
    )
    counts = [0] * len(writers)
    unk_count = 0

    def counted(batches):
        nonlocal unk_count
        for flat_ids, row_splits, kinds in batches:
            unk_count += int(np.count_nonzero(flat_ids == special.unk))
            yield flat_ids, row_splits, kinds

    sequences = packing.pack_token_batches(
        counted(token_batches),
        config.max_seq_length,
        special.cls,
        special.sep,
        packer=packer,
    )
    num_writers = len(writers)
    example_index = 0
    for record in serialized_examples(sequences, config, vocabulary):
        shard = example_index % num_writers
        writers[shard].write(record)
        counts[shard] += 1
        example_index += 1
    return counts, unk_count, packer


def shard_manifest(
    config,
    vocabulary,
    input_files,
    shard_entries,
    corpus_stats,
    packing_stats,
    unk_count,
    engine,
    num_partitions,
):
    """The manifest dict of a finished build (logs its warnings too).

    Args:
      config: the `ShardConfig`.
      vocabulary: the `vocab.Vocabulary`.
      input_files: the resolved input files.
      shard_entries: `{"name", "examples", "bytes", "sha256"}` per shard.
      corpus_stats: `corpus.CorpusStats` of the input.
      packing_stats: `packing.PackingStats` (summed over partitions).
      unk_count: `[UNK]` tokens in the text.
      engine: `ENGINE_SINGLE_PROCESS` or `"beam:<runner>"`.
      num_partitions: how many partitions were packed separately.
    """
    if corpus_stats.invalid_utf8_lines:
        logging.warning(
            "%d line(s) had bytes that are not UTF-8; they were replaced with "
            "U+FFFD.",
            corpus_stats.invalid_utf8_lines,
        )
    text_tokens = packing_stats.text_tokens
    unk_rate = unk_count / text_tokens if text_tokens else 0.0
    if unk_rate > DEFAULT_MAX_UNK_FRACTION:
        logging.warning(
            "%.1f%% of tokens are [UNK]: does --lowercase match the vocabulary "
            "%s?",
            100 * unk_rate,
            vocabulary.path,
        )
    manifest = {
        "format": manifest_lib.MANIFEST_FORMAT,
        "format_version": manifest_lib.MANIFEST_FORMAT_VERSION,
        "package_version": manifest_lib.package_version(),
        "vocab": {
            "file": os.path.basename(vocabulary.path),
            "sha256": vocabulary.sha256,
            "size": vocabulary.size,
            "special_token_ids": dataclasses.asdict(vocabulary.special_ids),
        },
        "lowercase": bool(config.lowercase),
        "tokenizer": "tensorflow_text.FastBertTokenizer",
        "packing": "full_sentences",
        "max_seq_length": config.max_seq_length,
        "schema": (
            manifest_lib.SCHEMA_STATIC
            if config.static_masking
            else manifest_lib.SCHEMA_DYNAMIC
        ),
        "features": list(
            manifest_lib.STATIC_FEATURES
            if config.static_masking
            else manifest_lib.DYNAMIC_FEATURES
        ),
        "static_masking": (
            {
                "dupe_factor": config.dupe_factor,
                "max_predictions_per_seq": config.max_predictions_per_seq,
                "mask_rate": config.mask_rate,
            }
            if config.static_masking
            else None
        ),
        "compression": config.tf_compression,
        "seed": config.seed,
        "num_examples": sum(s["examples"] for s in shard_entries),
        "engine": engine,
        "num_partitions": num_partitions,
        "shards": shard_entries,
        "sources": [
            {"path": p, "bytes": os.path.getsize(p)} for p in input_files
        ],
        "stats": {
            "corpus": dataclasses.asdict(corpus_stats),
            "sequences": packing_stats.sequences,
            "tokens": packing_stats.tokens,
            "text_tokens": text_tokens,
            "unk_tokens": unk_count,
            "documents": packing_stats.documents,
            "sentences": packing_stats.sentences,
            "split_sentences": packing_stats.split_sentences,
            "fill_ratio": round(
                packing_stats.fill_ratio(config.max_seq_length), 6
            ),
        },
    }
    return manifest


def padded_chunks(sequences, chunk_size, seq_length, pad_id):
    """Groups variable-length sequences into padded `[N, seq_length]` chunks.

    Yields:
      `(token_ids int32 [N, seq_length], lengths int32 [N])`, `N <= chunk_size`.
    """
    chunk = []
    for ids in sequences:
        chunk.append(ids)
        if len(chunk) == chunk_size:
            yield _pad(chunk, seq_length, pad_id)
            chunk = []
    if chunk:
        yield _pad(chunk, seq_length, pad_id)


def _pad(chunk, seq_length, pad_id):
    lengths = np.fromiter((len(ids) for ids in chunk), np.int32, len(chunk))
    token_ids = np.full([len(chunk), seq_length], pad_id, np.int32)
    # Row-major boolean assignment fills each row's leading slots in order.
    token_ids[np.arange(seq_length)[np.newaxis, :] < lengths[:, np.newaxis]] = (
        np.concatenate(chunk)
    )
    return token_ids, lengths


@dataclasses.dataclass(frozen=True)
class StaticMaskingSettings:
    """The `ShardConfig` fields that static masking depends on."""

    seed: int
    dupe_factor: int
    mask_rate: float
    max_predictions_per_seq: int


def make_chunk_serializer(config, vocabulary):
    """A `tf.function(token_ids, lengths, chunk_index) -> [N * D] records`.

    Dynamic schema: one `input_word_ids` example per sequence (unpadded).
    Static schema (TF Model Garden's, padded to `max_seq_length` and
    `max_predictions_per_seq`): `dupe_factor` masked copies of each sequence,
    one after the other, masked with `masking.mask_batch` under the stateless
    seed `[seed, chunk_index * dupe_factor + copy]`, so the output depends
    only on the inputs and the seed, never on thread timing.

    The same settings give the same function, traced once per process: a
    Beam worker builds many partitions, a test many shard sets.
    """
    if not config.static_masking:
        return _chunk_serializer(config.max_seq_length, None, None)
    settings = StaticMaskingSettings(
        seed=config.seed,
        dupe_factor=config.dupe_factor,
        mask_rate=config.mask_rate,
        max_predictions_per_seq=config.max_predictions_per_seq,
    )
    return _chunk_serializer(config.max_seq_length, settings, vocabulary)


@functools.lru_cache(maxsize=16)
def _chunk_serializer(seq_length, static_masking, vocabulary):
    """`make_chunk_serializer`'s function; `static_masking` is a
    `StaticMaskingSettings`, or None for the dynamic schema."""
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    signature = [
        tf.TensorSpec([None, seq_length], tf.int32),
        tf.TensorSpec([None], tf.int32),
        tf.TensorSpec([], tf.int64),
    ]

    if static_masking is None:

        @tf.function(input_signature=signature, autograph=False)
        def serialize_dynamic(token_ids, lengths, chunk_index):
            del chunk_index  # No randomness.
            return example_encoding.serialize_examples(
                {"input_word_ids": ("int64", token_ids, lengths)}
            )

        return serialize_dynamic

    is_special_table = masking.special_token_table(
        vocabulary.size, vocabulary.special_token_ids
    )
    replacement = masking.replacement_ids(
        vocabulary.size, vocabulary.special_token_ids
    )
    dupe_factor = static_masking.dupe_factor
    max_predictions = static_masking.max_predictions_per_seq

    # Features with few distinct values are encoded once, then gathered:
    # input_mask by length, masked_lm_weights by number of predictions.
    def entry_table(name, kind, rows):  # Eager, once: numpy bytes [R].
        return example_encoding.feature_entries(
            name, kind, tf.constant(rows)
        ).numpy()

    input_mask_table = entry_table(
        "input_mask", "int64", _leading_ones(seq_length, np.int64)
    )
    weights_table = entry_table(
        "masked_lm_weights", "float", _leading_ones(max_predictions, np.float32)
    )
    segment_ids_entry = entry_table(
        "segment_ids", "int64", np.zeros([1, seq_length], np.int64)
    )
    next_sentence_entry = entry_table(
        "next_sentence_labels", "int64", np.zeros([1, 1], np.int64)
    )

    @tf.function(input_signature=signature, autograph=False)
    def serialize_static(token_ids, lengths, chunk_index):
        padding = tf.range(seq_length)[tf.newaxis, :] < lengths[:, tf.newaxis]
        batch = tf.shape(token_ids)[0]
        constant_entries = {
            "input_mask": tf.gather(input_mask_table, lengths),
            "segment_ids": tf.repeat(segment_ids_entry, batch),
            "next_sentence_labels": tf.repeat(next_sentence_entry, batch),
        }
        copies = []
        for copy in range(dupe_factor):
            seed = tf.stack(
                [
                    tf.constant(static_masking.seed, tf.int64),
                    chunk_index * dupe_factor + copy,
                ]
            )
            masked, positions, label_ids, weights = masking.mask_batch(
                token_ids,
                padding,
                seed,
                mask_rate=static_masking.mask_rate,
                max_predictions=max_predictions,
                mask_id=vocabulary.special_ids.mask,
                is_special_table=is_special_table,
                replacement_id_array=replacement,
            )
            num_predictions = tf.reduce_sum(tf.cast(weights, tf.int32), axis=1)
            copies.append(
                example_encoding.examples_from_entries(
                    dict(
                        constant_entries,
                        input_ids=example_encoding.feature_entries(
                            "input_ids", "int64", masked
                        ),
                        masked_lm_positions=example_encoding.feature_entries(
                            "masked_lm_positions", "int64", positions
                        ),
                        masked_lm_ids=example_encoding.feature_entries(
                            "masked_lm_ids", "int64", label_ids
                        ),
                        masked_lm_weights=tf.gather(
                            weights_table, num_predictions
                        ),
                    )
                )
            )
        # Row-major: a sequence's copies are consecutive records.
        return tf.reshape(tf.stack(copies, axis=1), [-1])

    return serialize_static


def _leading_ones(width, dtype):
    """`[width + 1, width]`: row r has r ones, then zeros."""
    return np.tril(np.ones([width + 1, width], dtype), -1)


def serialized_examples(
    sequences, config, vocabulary, chunk_size=1024, max_chunks_in_flight=3
):
    """Yields the serialized `tf.train.Example`s of packed sequences, in order.

    Sequences are padded into chunks in Python and serialized (and, for the
    static schema, masked) a chunk at a time in TensorFlow. TensorFlow releases
    the GIL, so while worker threads serialize the last chunks the caller's
    thread goes on packing; at most `max_chunks_in_flight` chunks wait.
    """
    serialize = make_chunk_serializer(config, vocabulary)

    def run(token_ids, lengths, chunk_index):
        return serialize(token_ids, lengths, chunk_index).numpy()

    pending = collections.deque()
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        try:
            for chunk_index, (token_ids, lengths) in enumerate(
                padded_chunks(
                    sequences,
                    chunk_size,
                    config.max_seq_length,
                    vocabulary.special_ids.pad,
                )
            ):
                pending.append(
                    pool.submit(run, token_ids, lengths, chunk_index)
                )
                if len(pending) >= max_chunks_in_flight:
                    yield from pending.popleft().result()
            while pending:
                yield from pending.popleft().result()
        finally:
            for future in pending:
                future.cancel()
