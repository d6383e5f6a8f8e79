"""Pre-training shards on Apache Beam.

Pipeline: one element per partition (see `beam_common`: document `d` goes
to partition `d % P`) -> each partition tokenizes (TF-Text
`FastBertTokenizer`), FULL-SENTENCES packs and serializes its own documents
with the single-process code (`shards.tokenized_line_batches`,
`shards.pack_and_write`) and writes its examples round-robin into the shards
it owns (shard `j` belongs to partition `j % P`).

Same output, whichever engine: with `P = 1` the shards are byte-identical to
`shards.build_shards`'s. With `P > 1` each partition is packed on its own, so
the examples are those of `build_shards` run on each partition's documents
(the union, as a multiset); the manifest records `engine` and
`num_partitions`. Static masking seeds partition `p` with `seed + p * 2**32`
(partition 0 keeps `seed`).

Faults: shards are written under temporary names in `output_dir`; only after
the whole pipeline succeeded does the launching process check them, remove
an older run's manifest and shards, rename the new ones and write
`manifest.json` last. A failed run leaves no manifest and no final-named
shard of its own; rerunning completes. The output directory must be on a
filesystem that the workers and the launcher share (local runs, NFS).

Refusals: the input is checked like the single-process builder's
(`shards.preflight` before the pipeline; while reading, every partition
reads the whole input, so all refuse the same file): a partition that
refuses its input reports the error in its result file instead of raising
it in the runner, and the launcher raises it (`UserError`), like the
`[UNK]` share, summed over the partitions, before anything is renamed.
"""

import dataclasses
import os

from data_pipeline import beam_common
from data_pipeline import corpus
from data_pipeline import manifest as manifest_lib
from data_pipeline import packing
from data_pipeline import shard_config
from data_pipeline import shard_outputs
from data_pipeline import shards
from data_pipeline import vocab as vocab_lib
from tupe_tf.utils import fileio
from tupe_tf.utils.errors import UserError

_SEED_STRIDE = 1 << 32


def partition_seed(seed, partition):
    """The static-masking seed of a partition (partition 0 keeps `seed`)."""
    return seed + partition * _SEED_STRIDE


def owned_shards(partition, num_partitions, num_shards):
    """Indices of the shards partition `partition` writes."""
    return list(range(partition, num_shards, num_partitions))


@dataclasses.dataclass(frozen=True)
class _Run:
    """What every partition of a run needs (Beam pickles it to the
    workers): the checked config, the partition count, the input files,
    the directory of the partitions' results and the test hook."""

    config: shard_config.ShardConfig
    num_partitions: int
    input_files: list
    result_dir: str
    partition_hook: object = None


def _build_partition(partition, run, tmp_paths):
    """Tokenizes, packs and writes one partition of `run`; reports its
    result."""
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    config, input_files = run.config, run.input_files
    vocabulary = vocab_lib.load_vocabulary(config.vocab_file)
    stats = corpus.CorpusStats()
    batches = beam_common.partition_line_batches(
        input_files,
        partition,
        run.num_partitions,
        stats,
        config.line_batch_size,
        text_input=config,
    )
    token_batches = shards.tokenized_line_batches(
        input_files,
        vocabulary,
        config.lowercase,
        stats,
        config.line_batch_size,
        config.num_parallel_calls,
        line_batches=batches,
    )
    partition_config = dataclasses.replace(
        config, seed=partition_seed(config.seed, partition)
    )
    owned = owned_shards(partition, run.num_partitions, config.num_shards)
    options = tf.io.TFRecordOptions(compression_type=config.tf_compression)
    writers = [tf.io.TFRecordWriter(tmp_paths[j], options) for j in owned]
    try:
        counts, unk_count, packer = shards.pack_and_write(
            token_batches, partition_config, vocabulary, writers
        )
    except UserError as e:
        # The same in every partition; the launcher raises it.
        beam_common.write_partition_result(run.result_dir, partition, e)
        return
    finally:
        for writer in writers:
            writer.close()
    if run.partition_hook is not None:
        run.partition_hook(partition)
    result = {
        "shard_examples": dict(zip(owned, counts)),
        "unk_tokens": unk_count,
        "packing": dataclasses.asdict(packer.stats),
        "corpus": dataclasses.asdict(stats),
    }
    beam_common.write_partition_result(run.result_dir, partition, result)


def build_shards_beam(
    config,
    runner="DirectRunner",
    num_partitions=beam_common.DEFAULT_NUM_PARTITIONS,
    beam_options=None,
    partition_hook=None,
):
    """Builds the shards of `config` with an Apache Beam pipeline.

    Args:
      config: a `shards.ShardConfig`.
      runner: Beam runner name.
      num_partitions: document partitions packed separately, at most
        `config.num_shards`.
      beam_options: more pipeline options (see `beam_common.pipeline_options`).
      partition_hook: optional picklable callable run with the partition
        index after a partition wrote its shards (tests inject faults here).

    Returns:
      The manifest dict (also written to `output_dir/manifest.json`).

    Raises:
      UserError: Apache Beam is not installed; a bad config,
        `num_partitions`, runner or vocabulary; empty, binary, unreadable or
        undecodable input, too many `[UNK]` tokens (nothing is written);
        the refusals of `shards.build_shards` (missing files, an
        `output_dir` that cannot be used).

    Example:
    >>> build_shards_beam(shards.ShardConfig(input_patterns="wiki/*.txt",
    ...     vocab_file="vocab.txt", output_dir="shards", num_shards=16),
    ...     runner="DirectRunner", num_partitions=4)  # doctest: +SKIP
    """
    beam = beam_common.import_beam()
    beam_common.check_num_partitions(num_partitions)
    if num_partitions > config.num_shards:
        raise UserError(
            f"num_partitions ({num_partitions}) must be <= num_shards "
            f"({config.num_shards}): each partition writes its own shards."
        )
    vocabulary, input_files = shards.preflight(config)  # validates `config`
    options = beam_common.pipeline_options(runner, beam_options)
    output_dir = os.fspath(config.output_dir)
    with fileio.made_directory(output_dir, "--output_dir"):
        with fileio.work_directory(
            output_dir, shard_outputs.BEAM_WORK_DIR_PREFIX
        ) as result_dir:
            run = _Run(
                config, num_partitions, input_files, result_dir, partition_hook
            )
            shard_entries, results, packing_stats, unk_count = _run_pipeline(
                beam, options, run, vocabulary
            )
    manifest = manifest_lib.shard_manifest(
        config,
        vocabulary,
        input_files,
        shard_entries,
        corpus.CorpusStats(**results[0]["corpus"]),
        packing_stats,
        unk_count,
        engine=f"beam:{runner}",
        num_partitions=num_partitions,
    )
    manifest_lib.write_manifest(output_dir, manifest)
    return manifest


def _run_pipeline(beam, options, run, vocabulary):
    """Runs the pipeline and publishes the shards (not the manifest).

    Returns:
      `(shard_entries, partition_results, packing_stats, unk_count)`.
    """
    config, input_files = run.config, run.input_files
    output_dir = os.fspath(config.output_dir)
    names = shard_config.shard_names(config)
    final_paths = [os.path.join(output_dir, n) for n in names]
    with fileio.atomic_files(final_paths) as tmp_paths:
        with beam.Pipeline(options=options) as pipeline:
            _ = beam_common.partitions(
                pipeline, beam, run.num_partitions
            ) | "BuildPartition" >> beam.Map(_build_partition, run, tmp_paths)
        results = beam_common.read_partition_results(
            run.result_dir, run.num_partitions
        )
        counts = [0] * config.num_shards
        packing_stats = packing.PackingStats()
        unk_count = 0
        for result in results:
            for shard, count in result["shard_examples"].items():
                counts[int(shard)] = count
            unk_count += result["unk_tokens"]
            for field, value in result["packing"].items():
                setattr(
                    packing_stats,
                    field,
                    getattr(packing_stats, field) + value,
                )
        if sum(counts) == 0:
            raise corpus.empty_corpus_error(input_files)
        shards.check_unk_share(
            unk_count,
            packing_stats.text_tokens,
            config,
            vocabulary,
            input_files,
        )
        shard_entries = shard_outputs.shard_entries(names, tmp_paths, counts)
        # Every shard is complete: drop an older run's manifest and shards
        # now; leaving the `with` renames the new shards.
        shard_outputs.remove_previous_outputs(
            output_dir,
            keep={os.path.basename(p) for p in tmp_paths}
            | {os.path.basename(run.result_dir)},
        )
    return shard_entries, results, packing_stats, unk_count
