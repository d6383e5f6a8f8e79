"""WordPiece vocabulary learning on Apache Beam.

Pipeline: partitions (see `beam_common`) -> words counted per partition
(`wordpiece_learner.count_words`) -> `CombinePerKey(sum)` (the distributed
word count) -> all counts to one worker -> `learn_from_word_counts` ->
the vocabulary, written to a temporary file that the launching process
renames to `output_file` only after the pipeline succeeded. The learning
step is the single-process one on the same counts, so the vocabulary is the
same as `vocab.build_vocabulary(..., learner="tokenizers")`'s.

The output and the temporary files must be on a filesystem that the workers
and the launching process share (local runs, NFS); object stores (gs://)
are not supported yet.
"""

import os

from data_pipeline import beam_common
from data_pipeline import corpus
from data_pipeline import vocab as vocab_lib
from data_pipeline import wordpiece_learner
from tupe_tf.utils import fileio
from tupe_tf.utils import interrupts
from tupe_tf.utils.errors import UserError

# The pipeline's work directory, hidden in the output's directory.
WORK_DIR_PREFIX = ".beam-vocab-"


def _count_partition(
    partition,
    num_partitions,
    input_files,
    lowercase,
    batch_size,
    stats_dir,
    text_input=None,
    max_words=None,
):
    """Word counts of one partition's documents; reports its corpus stats
    in `stats_dir`.

    Input refused by `text_input` is reported there instead (the launcher
    raises it; every partition reads the whole input, so all refuse it) and
    counts nothing.
    """
    stats = corpus.CorpusStats()
    try:
        counts = wordpiece_learner.count_words(
            wordpiece_learner.text_chunks(
                beam_common.partition_line_batches(
                    input_files,
                    partition,
                    num_partitions,
                    stats,
                    batch_size,
                    text_input=text_input,
                )
            ),
            lowercase,
            max_words=max_words,
        )
    except UserError as e:
        beam_common.write_partition_result(stats_dir, partition, e)
        return []
    # Every partition reads the whole input: the same stats in each.
    beam_common.write_partition_result(
        stats_dir, partition, {"corpus": stats.__dict__}
    )
    return list(counts.items())


def _learn(word_counts, vocab_size, reserved_tokens, output_path, max_words):
    if not wordpiece_learner.learnable_word_counts(word_counts):
        return  # Empty corpus: the launcher reports it.
    tokens = wordpiece_learner.learn_from_word_counts(
        word_counts, vocab_size, reserved_tokens, max_words
    )
    fileio.write_text_atomically(output_path, "".join(t + "\n" for t in tokens))


def build_vocabulary_beam(
    input_patterns,
    vocab_size,
    output_file,
    lowercase=False,
    runner="DirectRunner",
    num_partitions=beam_common.DEFAULT_NUM_PARTITIONS,
    beam_options=None,
    reserved_tokens=vocab_lib.RESERVED_TOKENS,
    line_batch_size=1024,
    text_input=None,
    max_words=wordpiece_learner.DEFAULT_MAX_WORDS,
):
    """Learns the `tokenizers`-learner vocabulary with an Apache Beam pipeline.

    Args:
      input_patterns: as in `vocab.build_vocabulary`.
      vocab_size: upper bound of the vocabulary size.
      output_file: the vocabulary file to write (atomically).
      lowercase: case-fold and strip accents.
      runner: Beam runner name.
      num_partitions: document partitions counted in parallel.
      beam_options: more pipeline options (see `beam_common.pipeline_options`).
      reserved_tokens: tokens placed first.
      line_batch_size: lines normalised at once.
      text_input: `corpus.TextInputSettings`; `None` for the defaults.
      max_words: see `wordpiece_learner.MAX_WORDS_HELP`; each partition's
        counts are cut back as in the single-process count, the merged
        counts are exact sums of them.

    Returns:
      The summary dict of `vocab.build_vocabulary`, plus `engine` and
      `num_partitions`.

    Raises:
      UserError: Apache Beam is not installed; a bad `vocab_size`,
        `num_partitions` or runner; empty, binary, unreadable or
        undecodable input (nothing is written).
      fileio.NoMatchingFileError (a `UserError`): a missing input file.
      fileio.OutputError (a `UserError`): the directory of `output_file`
        cannot be created or written.

    Example:
    >>> build_vocabulary_beam("corpus/*.txt", 30522, "vocab.txt",
    ...     lowercase=True, runner="DirectRunner")  # doctest: +SKIP
    """
    if text_input is None:
        text_input = corpus.TextInputSettings()
    text_input.validate()  # First: a `VocabConfig`'s flags are named.
    beam = beam_common.import_beam()
    vocab_lib.check_vocab_size(vocab_size, reserved_tokens)
    beam_common.check_num_partitions(num_partitions)
    output_file = os.fspath(output_file)
    vocab_lib.check_output_file(output_file)
    input_files = corpus.resolve_input_files(
        input_patterns, text_input=text_input
    )
    options = beam_common.pipeline_options(runner, beam_options)
    out_dir = os.path.dirname(os.path.abspath(output_file))
    with fileio.made_directory(out_dir, "--output"):
        with fileio.work_directory(out_dir, WORK_DIR_PREFIX) as work_dir:
            stats = _run_pipeline(
                beam,
                options,
                num_partitions=num_partitions,
                input_files=input_files,
                lowercase=lowercase,
                line_batch_size=line_batch_size,
                work_dir=work_dir,
                vocab_size=vocab_size,
                reserved_tokens=reserved_tokens,
                text_input=text_input,
                output_file=output_file,
                max_words=max_words,
            )
    with open(output_file, encoding="utf-8") as f:
        size = len(f.read().splitlines())
    return {
        "vocab_size": size,
        "output_file": output_file,
        "sha256": fileio.file_sha256(output_file),
        "input_files": list(input_files),
        "lowercase": bool(lowercase),
        "learner": wordpiece_learner.LEARNER_TOKENIZERS,
        "engine": f"beam:{runner}",
        "num_partitions": num_partitions,
        "corpus_stats": stats,
    }


def _run_pipeline(
    beam,
    options,
    num_partitions,
    input_files,
    lowercase,
    line_batch_size,
    work_dir,
    vocab_size,
    reserved_tokens,
    text_input,
    output_file,
    max_words,
):
    """Runs the pipeline, then publishes the vocabulary; returns the corpus
    statistics."""
    learned = os.path.join(work_dir, "vocab.txt")
    with beam.Pipeline(options=options) as pipeline:
        _ = (
            beam_common.partitions(pipeline, beam, num_partitions)
            | "CountWords"
            >> beam.FlatMap(
                _count_partition,
                num_partitions,
                input_files,
                bool(lowercase),
                line_batch_size,
                work_dir,
                text_input,
                max_words,
            )
            | "SumCounts" >> beam.CombinePerKey(sum)
            | "AllCounts" >> beam.combiners.ToList()
            | "Learn"
            >> beam.Map(
                _learn, vocab_size, tuple(reserved_tokens), learned, max_words
            )
        )
    results = beam_common.read_partition_results(work_dir, num_partitions)
    stats = results[0]["corpus"]
    if not os.path.exists(learned):
        raise vocab_lib.no_words_error(input_files, stats["nonblank_lines"])
    interrupts.raise_if_interrupted()
    os.replace(learned, output_file)
    return stats


def build_from_config(config):
    """`build_vocabulary_beam` with a `vocab.VocabConfig`'s settings
    (which it validates); returns its summary."""
    return build_vocabulary_beam(
        **config.learning_arguments(),
        runner=config.runner,
        num_partitions=config.num_partitions,
        beam_options=config.beam_options,
    )
