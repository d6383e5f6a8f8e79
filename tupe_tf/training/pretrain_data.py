"""The data of a pre-training run: default data, input checks, datasets.

Steps "data" and "validate" of `tupe_tf.training.pretrain.run_pretraining`
(the vocabulary read and checked once, the shards checked, before anything
is built) and the `tf.data` input of step "train", including the refusal
of a shard that turns out damaged while it is read.
"""

import dataclasses

import tensorflow as tf

from data_pipeline import default_data
from data_pipeline import masking
from data_pipeline import reader
from data_pipeline import shard_verification
from data_pipeline import vocab
from tupe_tf.training.config import PretrainConfig
from tupe_tf.utils import fileio
from tupe_tf.utils.errors import UserError


def expand_patterns(patterns, flag):
    """`fileio.expand_patterns` through `tf.io.gfile`, which also reads
    remote paths (`gs://...`)."""
    return fileio.expand_patterns(
        patterns, flag, glob_fn=tf.io.gfile.glob, exists_fn=tf.io.gfile.exists
    )


@dataclasses.dataclass(frozen=True)
class RunData:
    """The checked data of a run.

    Attributes:
        config: the `PretrainConfig`, its default data resolved.
        vocabulary: its `data_pipeline.vocab.Vocabulary`.
        train_files, eval_files: the expanded shard paths.
    """

    config: PretrainConfig
    vocabulary: vocab.Vocabulary
    train_files: list
    eval_files: list


def prepare_data(config):
    """Steps "data" and "validate" for the data: the default data built
    or reused (`resolve_default_data`) without `--train_files`, then
    `check_data`. A given `--vocab_file` is read and checked before the
    default data is built, and once.

    Returns:
        A `RunData`.

    Raises:
        UserError: naming the flag and the file.
    """
    if config.train_files:
        return check_data(config)
    vocabulary = read_vocabulary(config) if config.vocab_file else None
    return check_data(resolve_default_data(config), vocabulary)


def check_data(config, vocabulary=None):
    """Refuses a vocabulary or shards a `PretrainConfig` cannot train on:
    `read_vocabulary` (unless `vocabulary` is the one read already), then
    the shards against it (`check_shards`).

    Returns:
        A `RunData`.

    Raises:
        UserError: naming the flag and the file.

    Example:
    >>> data = check_data(config)  # doctest: +SKIP
    >>> data.vocabulary.size, data.train_files  # doctest: +SKIP
    """
    if vocabulary is None:
        vocabulary = read_vocabulary(config)
    train_files = expand_patterns(config.train_files, "--train_files")
    eval_files = expand_patterns(config.eval_files, "--eval_files")
    check_shards(config, vocabulary, train_files, eval_files)
    return RunData(config, vocabulary, train_files, eval_files)


def check_shards(config, vocabulary, train_files, eval_files):
    """Refuses `--train_files` and `--eval_files` (expanded) that do not
    match their manifests, `vocabulary` and `--seq_length`
    (`data_pipeline.shard_verification.check_training_shards`).

    Raises:
        UserError: naming the flag and the file.
    """
    if not train_files:
        raise UserError("--train_files is empty.")
    checked = [(train_files, "--train_files")]
    if eval_files:
        checked.append((eval_files, "--eval_files"))
    for files, flag in checked:
        shard_verification.check_training_shards(
            files,
            flag,
            vocabulary,
            config.seq_length,
            skip_bad_shards=config.skip_bad_shards,
        )


def read_vocabulary(config):
    """The run's `--vocab_file`, read by `vocab.load_vocabulary`; refused
    when missing or not a vocabulary, or, with `--whole_word_masking`,
    without `##` pieces.

    Raises:
        UserError: naming `--vocab_file`.
    """
    vocab_file = config.vocab_file
    if not vocab_file or not tf.io.gfile.exists(vocab_file):
        raise UserError(f"--vocab_file={vocab_file!r} does not exist.")
    try:
        vocabulary = vocab.load_vocabulary(vocab_file)
    except (ValueError, OSError) as error:
        reason = str(error).rstrip(". ") + "."
        raise UserError(
            f"--vocab_file={vocab_file!r} is not a usable vocabulary: "
            f"{reason} Pass the vocabulary the shards were built with "
            "(scripts/build_vocab.py writes one)."
        ) from error
    if config.whole_word_masking:
        masking.continuation_table(vocabulary)
    return vocabulary


def resolve_default_data(config):
    """Step "data": without `train_files`, the embedded-corpus default data.

    Returns `config` itself when it names its shards, else a copy whose
    `train_files`, `eval_files` and `vocab_file` are the default data built
    (or reused) under `config.work_dir`: with the shards tokenized by
    `--vocab_file` when it is given, else with a vocabulary learned there.
    """
    if config.train_files:
        return config
    data = default_data.prepare_default_data(
        config.work_dir,
        seq_length=config.seq_length,
        vocab_file=config.vocab_file or None,
    )
    return dataclasses.replace(
        config,
        train_files=data.train_files,
        eval_files=data.eval_files,
        vocab_file=data.vocab_file,
    )


def make_dataset(
    config,
    files,
    batch_size,
    is_training,
    skip_batches=0,
    input_context=None,
    vocabulary=None,
):
    """The MLM dataset; training data repeats and starts `skip_batches` in.

    Evaluation data is one deterministic pass, repeated and cut to
    `config.eval_steps` batches so every worker runs the same number of steps.
    `vocabulary`: the run's, read already; `None` reads `config.vocab_file`.
    """
    dataset = reader.pretraining_dataset(
        files,
        vocabulary or config.vocab_file,
        config.seq_length,
        batch_size,
        max_predictions_per_seq=config.max_predictions_per_seq,
        mask_rate=config.mask_rate,
        whole_word_masking=config.whole_word_masking,
        is_training=is_training,
        shuffle_buffer=config.shuffle_buffer,
        seed=config.seed,
        # A fixed order is what makes "skip the batches already trained on"
        # resume at the right place.
        deterministic=True,
        input_context=input_context,
        skip_bad_shards=config.skip_bad_shards,
        drop_remainder=True,
        skip_batches=skip_batches,
    )
    if not is_training:
        dataset = dataset.repeat().take(config.eval_steps)
    return dataset.prefetch(tf.data.AUTOTUNE)


def make_input_fns(run):
    """`(train_data(skip_batches), eval_data())` for `run`'s strategy.

    Under `MultiWorkerMirroredStrategy` each worker reads its own part of
    the files with its per-replica batch; elsewhere the global batch is read
    once. `eval_data()` is `None` without `eval_files`.

    Args:
        run: a `tupe_tf.training.pretrain.PretrainingRun`.
    """
    config, strategy = run.config, run.strategy

    def data(files, is_training, skip=0):
        if not run.multi_worker:
            return make_dataset(
                config,
                files,
                config.global_batch_size,
                is_training,
                skip,
                vocabulary=run.vocabulary,
            )
        return strategy.distribute_datasets_from_function(
            lambda ctx: make_dataset(
                config,
                files,
                run.per_replica_batch,
                is_training,
                skip * (ctx.num_replicas_in_sync // ctx.num_input_pipelines),
                input_context=ctx,
                vocabulary=run.vocabulary,
            )
        )

    def train_data(skip):
        return data(run.train_files, True, skip)

    def eval_data():
        return data(run.eval_files, False) if run.eval_files else None

    return train_data, eval_data


def refuse_bad_shard(error, config):
    """Raises the reader's `BadShardError` that `error` carries, naming
    `--skip_bad_shards` and the checkpoint training resumes from.

    Args:
        error: a `tf.errors.OpError` raised while training or evaluating.
        config: the run's `PretrainConfig`.

    Raises:
        reader.BadShardError: if `error` is the reader's bad-shard check;
            otherwise nothing is raised.
    """
    bad = reader.BadShardError.from_op_error(error)
    if bad is None:
        return
    message = str(bad).replace(reader.SKIP_OVERRIDE, "--skip_bad_shards")
    latest = tf.train.latest_checkpoint(config.checkpoint_dir)
    kept = (
        f"the last checkpoint, {latest}, is kept and a rerun resumes from it"
        if latest
        else "no checkpoint had been written yet"
    )
    raise reader.BadShardError(
        f"{message} Training stopped; {kept}."
    ) from error
