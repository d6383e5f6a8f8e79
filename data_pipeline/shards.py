"""Building MLM pre-training TFRecord shards from raw text.

Pipeline (streaming; memory does not grow with the corpus):

  text files --(corpus.text_line_batches: Python file reading, UTF-8 check)-->
  batches of lines --(tf.data parallel map: tensorflow_text.FastBertTokenizer)
  --> ragged ids --(packing.FullSentencesPacker)--> [CLS] ... [SEP] sequences
  --> padded chunks --(shard_serialization: optional static masking, batched
  tf.train.Example serialization with tf.io.encode_proto)--> K TFRecord shards
  (round-robin), written under temporary names, renamed, manifest last.

The steps live in their own modules: the settings in `shard_config`
(`ShardConfig`, also importable from here), the serialization in
`shard_serialization`, the output directory in `shard_outputs` and the
manifest in `manifest`.
"""

import os
import time

import numpy as np
from absl import logging

from data_pipeline import corpus
from data_pipeline import dataset_options
from data_pipeline import manifest as manifest_lib
from data_pipeline import masking
from data_pipeline import packing
from data_pipeline import shard_config
from data_pipeline import shard_outputs
from data_pipeline import shard_serialization
from data_pipeline import vocab as vocab_lib
from data_pipeline.shard_config import ShardConfig
from tupe_tf.utils import fileio
from tupe_tf.utils.errors import UserError

__all__ = [
    "ENGINE_SINGLE_PROCESS",
    "ShardConfig",
    "build_shards",
    "check_unk_share",
    "pack_and_write",
    "preflight",
    "tokenized_line_batches",
]

# `manifest["engine"]` of shards built by `build_shards` in one process.
ENGINE_SINGLE_PROCESS = "single_process"


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
    (`shard_outputs.check_output_dir`, and that it can be created and
    written in; it is not left behind). Cheap (no TensorFlow): the script
    runs it before importing TensorFlow.

    Returns:
      `(vocabulary, input_files)`.

    Raises:
      UserError: see `build_shards`.

    Example:
    >>> vocabulary, input_files = preflight(config)  # doctest: +SKIP
    """
    config.validate()
    vocabulary = vocab_lib.load_vocabulary(config.vocab_file)
    if config.whole_word_masking:
        masking.continuation_table(vocabulary)
    input_files = corpus.resolve_input_files(
        config.input_patterns, text_input=config
    )
    output_dir = os.fspath(config.output_dir)
    shard_outputs.check_output_dir(output_dir, config.overwrite)
    with fileio.made_directory(output_dir, "--output_dir", keep=False):
        pass
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
      UserError: a bad config field, a bad vocabulary (or one without
        `##` pieces with `whole_word_masking`); empty, binary,
        unreadable or undecodable input, too many `[UNK]` tokens.
      fileio.NoMatchingFileError (a `UserError`): a missing input or
        vocabulary file.
      fileio.OutputError (a `UserError`): `output_dir` is a file, is not
        empty and `overwrite` is not set, or cannot be created or written.

    Example:
    >>> build_shards(ShardConfig(input_patterns="wiki/*.txt",
    ...     vocab_file="vocab.txt", output_dir="shards", num_shards=16))  # doctest: +SKIP
    """
    vocabulary, input_files = preflight(config)
    output_dir = os.fspath(config.output_dir)
    names = shard_config.shard_names(config)
    final_paths = [os.path.join(output_dir, n) for n in names]
    corpus_stats = corpus.CorpusStats()
    start_time = time.time()
    # The temporaries replace the final shards only if the body succeeds.
    with (
        fileio.made_directory(output_dir, "--output_dir"),
        fileio.atomic_files(final_paths) as tmp_paths,
    ):
        counts, unk_count, packer = _write_shards(
            config, vocabulary, input_files, tmp_paths, corpus_stats
        )
        if sum(counts) == 0:
            raise corpus.empty_corpus_error(input_files)
        check_unk_share(
            unk_count,
            packer.stats.text_tokens,
            config,
            vocabulary,
            input_files,
        )
        entries = shard_outputs.shard_entries(names, tmp_paths, counts)
        # Every shard is complete: only now drop an older run's files (its
        # manifest first); leaving the `with` renames the new shards, then
        # the manifest is written.
        shard_outputs.remove_previous_outputs(
            output_dir, keep={os.path.basename(p) for p in tmp_paths}
        )
    elapsed = time.time() - start_time
    manifest = manifest_lib.shard_manifest(
        config,
        vocabulary,
        input_files,
        entries,
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


def _write_shards(config, vocabulary, input_files, tmp_paths, corpus_stats):
    """Tokenizes, packs and writes the corpus into the (temporary) shard
    files, closing them; returns `pack_and_write`'s result."""
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    options = tf.io.TFRecordOptions(compression_type=config.tf_compression)
    writers = []
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
        result = pack_and_write(token_batches, config, vocabulary, writers)
        for writer in writers:
            writer.close()
    except BaseException:
        for writer in writers:
            try:
                writer.close()
            except Exception:  # pylint: disable=broad-except
                pass
        raise
    return result


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
    for record in shard_serialization.serialized_examples(
        sequences, config, vocabulary
    ):
        shard = example_index % num_writers
        writers[shard].write(record)
        counts[shard] += 1
        example_index += 1
    return counts, unk_count, packer
