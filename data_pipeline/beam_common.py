"""What the Apache Beam pipelines of `beam_vocab` and `beam_shards` share:
pipeline options and the deterministic partitioning of documents.

Documents are the blank-line-separated groups of lines of the input files,
numbered in reading order (files in the given order); document `d` belongs
to partition `d % num_partitions`. Every partition reads the input and keeps
its own documents, so a partition's work depends only on the input and the
partition count, never on the runner or worker timing. Reading is the cheap
part (tokenizing and packing dominate); each worker reads every file.

Apache Beam is optional (`pip install tupe-tf[beam]`); it is imported only
when a pipeline runs.
"""

import dataclasses
import json
import os
import shlex

from data_pipeline import corpus
from tupe_tf.utils import fileio
from tupe_tf.utils.errors import UserError
from tupe_tf.utils.settings import Settings
from tupe_tf.utils.settings import at_least
from tupe_tf.utils.settings import refuse_ignored
from tupe_tf.utils.settings import setting

BEAM_MISSING = (
    "Apache Beam is not installed: pip install 'tupe-tf[beam]' "
    "(or apache-beam) to use --runner."
)
RUNNER_HELP = (
    "Apache Beam runner (DirectRunner, DataflowRunner, FlinkRunner, "
    "SparkRunner, ...); empty: the single-process path (the default)."
)
BEAM_OPTIONS_HELP = (
    "Further Beam pipeline options, as one shell-quoted string, e.g. "
    "'--direct_num_workers=2 --direct_running_mode=multi_processing' or "
    "'--project=P --region=R --temp_location=gs://B/tmp'."
)
NUM_PARTITIONS_HELP = (
    "With --runner: documents are split into this many partitions "
    "(document d goes to partition d % num_partitions), each packed on its "
    "own."
)
DEFAULT_NUM_PARTITIONS = 2


@dataclasses.dataclass(kw_only=True)
class BeamSettings(Settings):
    """The Beam settings of `ShardConfig` and `VocabConfig` (their flags).

    Keyword-only, so configs that inherit them keep their own field order.
    """

    runner: str = setting("", help=RUNNER_HELP)
    num_partitions: int = setting(
        DEFAULT_NUM_PARTITIONS, help=NUM_PARTITIONS_HELP, valid=at_least(1)
    )
    beam_options: str = setting("", help=BEAM_OPTIONS_HELP)

    def refuse_unused_beam_settings(self):
        """Refuses Beam settings given without `--runner` (unused)."""
        refuse_ignored(
            self,
            ("num_partitions", "beam_options"),
            bool(self.runner),
            "with --runner (Apache Beam)",
        )


def import_beam():
    """`apache_beam`, or a `UserError` saying how to install it."""
    try:
        import apache_beam  # pylint: disable=g-import-not-at-top
    except ImportError as e:
        raise UserError(BEAM_MISSING) from e
    return apache_beam


def pipeline_options(runner, beam_options=None):
    """`PipelineOptions` for `runner` plus a shell-quoted option string.

    Args:
      runner: a Beam runner name, e.g. `"DirectRunner"`.
      beam_options: `None`, a string (split like a shell command line) or a
        list of `--flag=value` strings.

    Raises:
      UserError: Beam is not installed, or does not know `runner` (Beam's
        message, which lists the runners it knows).

    Example:
    >>> pipeline_options("DirectRunner", "--direct_num_workers=2")  # doctest: +SKIP
    """
    import_beam()
    from apache_beam.options.pipeline_options import PipelineOptions  # pylint: disable=g-import-not-at-top
    from apache_beam.runners.runner import create_runner  # pylint: disable=g-import-not-at-top

    try:
        create_runner(runner)
    except ValueError as e:  # "Unexpected pipeline runner: ..."
        raise UserError(str(e)) from e
    if isinstance(beam_options, str):
        beam_options = shlex.split(beam_options)
    return PipelineOptions(list(beam_options or []) + [f"--runner={runner}"])


def partitions(pipeline, beam, num_partitions):
    """The pipelines' first steps: one element per partition, spread over
    the workers."""
    return (
        pipeline
        | "Partitions" >> beam.Create(list(range(num_partitions)))
        | "Spread" >> beam.Reshuffle()
    )


def _result_path(result_dir, partition):
    return os.path.join(result_dir, f"partition-{partition:05d}.json")


def write_partition_result(result_dir, partition, result):
    """Writes what partition `partition` reports to the launcher: a dict,
    or the `UserError` its input was refused with (the user's error, not
    the runner's: the launcher raises it)."""
    if isinstance(result, UserError):
        result = {"error": str(result)}
    fileio.write_text_atomically(
        _result_path(result_dir, partition), json.dumps(result)
    )


def read_partition_results(result_dir, num_partitions):
    """The partitions' results, in partition order, once the pipeline ran.

    Raises:
      UserError: the refusal a partition reported (the first).
      RuntimeError: a partition reported nothing.
    """
    results = []
    for partition in range(num_partitions):
        path = _result_path(result_dir, partition)
        if not os.path.exists(path):
            raise RuntimeError(
                f"Partition {partition} of {num_partitions} reported "
                "no result; nothing was published."
            )
        with open(path, encoding="utf-8") as f:
            results.append(json.load(f))
    for result in results:
        if "error" in result:
            raise UserError(result["error"])
    return results


def check_num_partitions(num_partitions):
    if not isinstance(num_partitions, int) or num_partitions < 1:
        raise UserError(
            f"num_partitions must be an int >= 1, got {num_partitions!r}."
        )


def partition_line_batches(
    input_files,
    partition,
    num_partitions,
    stats=None,
    batch_size=1024,
    text_input=None,
):
    """`corpus.text_line_batches` restricted to one partition's documents.

    A blank line ends a document and stays with it (it is the document
    boundary the packer needs).

    Args:
      input_files: list of paths.
      partition: which partition, in `[0, num_partitions)`.
      num_partitions: the number of partitions.
      stats: optional `corpus.CorpusStats`, updated for the whole input.
      batch_size: lines per batch.
      text_input: optional `corpus.TextInputSettings`, checked on the whole
        input (every partition reads it all, so all refuse the same file).

    Yields:
      `(lines, kinds)` like `corpus.text_line_batches`.
    """
    batches = corpus.text_line_batches(
        input_files, stats=stats, batch_size=batch_size, text_input=text_input
    )
    if num_partitions == 1:
        yield from batches
        return
    document = 0
    out_lines, out_kinds = [], []
    for lines, kinds in batches:
        for line, kind in zip(lines, kinds):
            if document % num_partitions == partition:
                out_lines.append(line)
                out_kinds.append(kind)
            if not line and kind == corpus.NEW_LINE:
                document += 1
        if len(out_lines) >= batch_size:
            yield out_lines, out_kinds
            out_lines, out_kinds = [], []
    if out_lines:
        yield out_lines, out_kinds
