"""Masked-LM pre-training of a `TupeBackbone` with `model.fit`.

`run_pretraining(config)` is the library entry point behind
`scripts/pretrain.py`. It validates everything that can be wrong before the
first step, builds (or resumes) the model under the requested
`tf.distribute` strategy, trains with `model.fit` (or, under
`MultiWorkerMirroredStrategy`, with `DistributedTrainingLoop`), evaluates,
and writes a keras-hub preset.

This module holds the run's steps and the training loop;
`pretrain_data` the default data, the input checks and the datasets;
`pretrain_model` the model, its checkpoints and its preset.
"""

import contextlib
import dataclasses
import math
import os
import time
from typing import Optional
from typing import Sequence

import keras
import tensorflow as tf

from data_pipeline import vocab
from tupe_tf.models.tupe_tokenizer import TupeTokenizer
from tupe_tf.training import distribution
from tupe_tf.training import init_from
from tupe_tf.training import multi_worker
from tupe_tf.training import preemption
from tupe_tf.training import pretrain_data
from tupe_tf.training import pretrain_model
from tupe_tf.training import run_lock
from tupe_tf.training import run_record
from tupe_tf.training.callbacks import CheckpointSaver
from tupe_tf.training.callbacks import NonFiniteLossGuard
from tupe_tf.training.callbacks import TrainingLogger
from tupe_tf.training.callbacks import global_step
from tupe_tf.training.config import PretrainConfig
from tupe_tf.training.multi_worker import DistributedTrainingLoop
from tupe_tf.utils import disk_full
from tupe_tf.utils import errors
from tupe_tf.utils import fileio
from tupe_tf.utils.backend import require_tensorflow
from tupe_tf.utils.errors import UserError


@dataclasses.dataclass
class PretrainingResult:
    """What `run_pretraining` returns.

    Attributes:
        model: the trained `TupeMaskedLM`.
        results: the dict also written to `<model_dir>/results.json`.
        strategy: the strategy the model lives in.
    """

    model: keras.Model
    results: dict
    strategy: tf.distribute.Strategy


def validate_settings(config, strategy=None):
    """Checks what a `PretrainConfig`'s flags alone decide, before any data
    is built: each setting's range and choices, the lengths,
    the `--init_from` preset against the model flags, the batch against the
    strategy's replicas, a writable `--model_dir`
    (and `--work_dir` for the default data), checked without keeping them
    (`hold_model_dir` creates `--model_dir`, the default data's build its
    `--work_dir`). A `--model_dir` URL of a scheme TensorFlow cannot write
    (`fileio.check_scheme`) is refused first.

    Returns:
        The `--init_from` preset, read and checked
        (`init_from.InitSource`), or `None`.

    Raises:
        UserError: naming the offending flag.
    """
    config.validate()
    fileio.check_scheme(config.model_dir, "--model_dir")
    if config.eval_files and not config.train_files:
        raise UserError(
            "--eval_files needs --train_files: without --train_files the run "
            "trains and evaluates on the embedded corpus's shards. Pass "
            "--train_files too, or leave out --eval_files."
        )
    if config.seq_length > config.model.max_sequence_length:
        raise UserError(
            f"--seq_length={config.seq_length} is above the model's "
            f"max_sequence_length={config.model.max_sequence_length} "
            "(--max_sequence_length). Lower --seq_length or raise "
            "--max_sequence_length."
        )
    source = None
    if config.init_from:
        source = init_from.read_source(config.init_from)
        init_from.check_fit(source, config.model)
    if strategy is not None:
        distribution.micro_batch_size(
            config.global_batch_size,
            strategy,
            config.gradient_accumulation_steps,
        )
    outputs = [(config.model_dir, "--model_dir")]
    if not config.train_files:
        outputs.insert(0, (config.work_dir, "--work_dir"))
    for directory, flag in outputs:
        # Created, written and removed again: a refusal of the data that
        # comes after leaves no directory behind.
        with fileio.made_directory(directory, flag, keep=False):
            pass
    return source


def _fit_segments(step, total, every):
    """Splits steps [step, total) into (steps_per_epoch, num_epochs) runs.

    Epochs end on multiples of `every` (checkpoint boundaries); a resumed or
    uneven run gets a short first or last epoch; none when `step` is at
    or past `total`.
    """
    segments = []
    if step >= total:
        return segments
    head = min((-step) % every, total - step)
    if head:
        segments.append((head, 1))
        step += head
    full = (total - step) // every
    if full:
        segments.append((every, full))
        step += full * every
    if total - step:
        segments.append((total - step, 1))
    return segments


@dataclasses.dataclass(frozen=True)
class PretrainingRun:
    """A prepared run: what the steps of `run_pretraining` share, each
    read and checked once, by `start_run` (the settings) and `add_data`
    (the data); `prepare_run` does both.

    Attributes:
        config: the `PretrainConfig`; once `add_data` ran, its default
            data resolved and its learning rate set.
        strategy: the `tf.distribute.Strategy`.
        paths: where this worker writes (`distribution.WorkerPaths`).
        init_source: the checked `--init_from` preset
            (`init_from.InitSource`), or `None`.
        vocabulary: the run's `data_pipeline.vocab.Vocabulary`.
        train_files, eval_files: the expanded, checked shard paths.
    """

    config: PretrainConfig
    strategy: tf.distribute.Strategy
    paths: distribution.WorkerPaths
    init_source: Optional[init_from.InitSource] = None
    vocabulary: Optional[vocab.Vocabulary] = None
    train_files: Sequence[str] = ()
    eval_files: Sequence[str] = ()

    @property
    def chief(self):
        return distribution.is_chief(self.strategy)

    @property
    def multi_worker(self):
        return self.config.runtime.strategy == "multi_worker_mirrored"

    @property
    def per_replica_batch(self):
        """Each replica's share of `--global_batch_size`, which
        `validate_settings` checked divides evenly."""
        replicas = self.strategy.num_replicas_in_sync
        return self.config.global_batch_size // replicas

    @property
    def vocabulary_size(self):
        return self.vocabulary.size


def start_run(config):
    """Step "strategy": the strategy, the flags checked
    (`validate_settings`, which reads `--init_from`) and this worker's
    paths: a `PretrainingRun` without its data yet.

    Raises:
        UserError: naming the bad flag; nothing built or written.
    """
    runtime = config.runtime
    # The strategy comes first: logical CPU devices must be configured
    # before anything (including the data checks) initialises TF.
    strategy = distribution.create_strategy(
        runtime.strategy,
        tpu=runtime.tpu,
        num_cpu_devices=runtime.num_cpu_devices,
    )
    # Everything the flags alone decide is refused before data are built.
    source = validate_settings(config, strategy)
    return PretrainingRun(
        config=config,
        strategy=strategy,
        paths=distribution.worker_paths(config, strategy),
        init_source=source,
    )


@contextlib.contextmanager
def hold_model_dir(run):
    """`--model_dir`, created when missing (`fileio.made_directory`), and
    its lock (`run_lock.hold`) for this worker: the chief's `run.lock`,
    each other worker's own `.worker<i>_run.lock` (every worker writes
    there: the others their scratch checkpoints).

    The directories it created are removed again when the `with` body
    fails while they are empty (the lock is released first), so that a
    run refused for its data (`add_data`) leaves no `--model_dir` behind.
    """
    model_dir = run.config.model_dir
    with fileio.made_directory(model_dir, "--model_dir"):
        with run_lock.hold(model_dir, run.paths.lock_name) as lock:
            yield lock


def add_data(run):
    """Steps "data" and "validate": `run` with its data built or reused,
    the vocabulary read and the shards checked once
    (`pretrain_data.prepare_data`), the `--init_from` preset's vocabulary
    checked against it and the learning rate resolved.

    Raises:
        UserError: naming the bad flag or file; nothing trained.
    """
    data = pretrain_data.prepare_data(run.config)
    if run.init_source is not None:
        init_from.check_vocabulary(run.init_source, data.vocabulary)
    return dataclasses.replace(
        run,
        config=pretrain_model.resolve_learning_rate(data.config),
        vocabulary=data.vocabulary,
        train_files=data.train_files,
        eval_files=data.eval_files,
    )


def prepare_run(config):
    """Every step before the model: `start_run`, then `add_data`.

    Returns:
        A `PretrainingRun`.

    Raises:
        UserError: naming the bad flag or file; nothing trained.

    Example:
    >>> run = prepare_run(PretrainConfig(num_train_steps=100))
    >>> run.vocabulary.size, run.train_files
    """
    return add_data(start_run(config))


def eval_interval_epochs(config):
    """Evaluation runs at checkpoint boundaries: every this many "epochs"
    (of `save_every` steps), the first boundary at or after `eval_every`
    steps; 0 when evaluation is at the end only."""
    if not config.eval_every:
        return 0
    return -(-config.eval_every // config.save_every)


@dataclasses.dataclass
class TrainingOutcome:
    """What step "train" hands to "evaluate" and "publish"."""

    history: dict
    seconds: float
    final_checkpoint: str
    logger: TrainingLogger
    loop: DistributedTrainingLoop


def train(run, model, manager, start_step, train_data, eval_data):
    """Step "train": fits from `start_step` to `num_train_steps`.

    Each Keras "epoch" is `save_every` steps and ends with a checkpoint
    (`_fit_segments`); evaluation runs every `eval_interval_epochs`. Under
    `MultiWorkerMirroredStrategy` the `DistributedTrainingLoop` replaces
    `model.fit`. Ends with a final checkpoint. A SIGTERM (preemption)
    during the steps saves the step the run is at and raises
    `preemption.PreemptedError`.
    """
    watch_gce = preemption.watches_gce(run.config, run.strategy)
    with preemption.StopRequests(watch_gce) as stop_requests:
        return _train(
            run,
            model,
            manager,
            start_step,
            train_data,
            eval_data,
            stop_requests,
        )


def _train(
    run, model, manager, start_step, train_data, eval_data, stop_requests
):
    config = run.config
    saver = CheckpointSaver(manager)
    stop_on_request = preemption.StopOnRequest(
        stop_requests, saver, config.checkpoint_dir
    )
    callbacks = [NonFiniteLossGuard(manager), stop_on_request, saver]
    logger = None
    if run.chief:
        logger = TrainingLogger(
            config.log_dir, config.log_every, config.global_batch_size
        )
        callbacks.append(logger)
    verbose = config.verbose if run.chief else 0
    eval_every_epochs = eval_interval_epochs(config)
    loop = None
    if run.multi_worker:
        loop = DistributedTrainingLoop(
            model, run.strategy, verbose, stop_requests
        )
    start_time = time.time()
    history = {}
    step = start_step
    if step >= config.num_train_steps:
        print(
            f"Nothing to train: the checkpoint is at step {step}, "
            f"--num_train_steps={config.num_train_steps}.",
            flush=True,
        )
    epoch = step // config.save_every
    for steps_per_epoch, num_epochs in _fit_segments(
        step, config.num_train_steps, config.save_every
    ):
        fit_kwargs = dict(
            epochs=epoch + num_epochs,
            initial_epoch=epoch,
            steps_per_epoch=steps_per_epoch,
            callbacks=callbacks,
        )
        validation = (
            eval_data()
            if (eval_every_epochs and steps_per_epoch == config.save_every)
            else None
        )
        if validation is not None:
            fit_kwargs.update(
                validation_data=validation,
                validation_steps=config.eval_steps if loop else None,
                validation_freq=eval_every_epochs,
            )
        if loop is not None:
            segment = loop.fit(train_data(step), **fit_kwargs)
        else:
            segment = model.fit(
                train_data(step), verbose=verbose, shuffle=False, **fit_kwargs
            )
        for name, values in segment.history.items():
            history.setdefault(name, []).extend(float(v) for v in values)
        epoch += num_epochs
        step = global_step(model)
    seconds = time.time() - start_time
    for callback in callbacks:  # Also when no step ran.
        callback.set_model(model)
    if loop is not None:
        loop.agree_to_stop()
    if stop_requests.should_stop:
        # Asked during the last step: saved, not evaluated.
        stop_on_request.stop()
    final_checkpoint = saver.save()
    return TrainingOutcome(history, seconds, final_checkpoint, logger, loop)


def with_perplexity(eval_results):
    """Float metrics plus `perplexity = exp(min(loss, 50))` when there is a
    loss (the cap keeps a diverged loss finite)."""
    results = {k: float(v) for k, v in eval_results.items()}
    if results.get("loss") is not None:
        results["perplexity"] = float(math.exp(min(results["loss"], 50.0)))
    return results


def evaluate(run, model, outcome, eval_data):
    """Step "evaluate": one pass of `eval_steps` batches over `eval_files`
    ({} without them), logged to TensorBoard by the chief."""
    if not run.eval_files:
        return {}
    if outcome.loop is not None:
        results = outcome.loop.evaluate(eval_data(), run.config.eval_steps)
    else:
        results = model.evaluate(eval_data(), verbose=0, return_dict=True)
    results = with_perplexity(results)
    if outcome.logger is not None:
        outcome.logger.write_eval(results)
    return results


def publish(run, model, manager, start, outcome, eval_results):
    """Step "publish": the float32 preset and, on the chief,
    `results.json`; returns the results dict.

    `start` is `(start_step, init_from)`: the step this process started
    from and where the run's weights came from (`run_record`'s start).
    """
    config = run.config
    preset_dir = run.paths.preset_dir
    tokens = list(run.vocabulary.tokens)
    pretrain_model.save_preset_atomically(
        pretrain_model.float32_model(model, config, run.vocabulary_size),
        preset_dir,
        lambda: TupeTokenizer(vocabulary=tokens, lowercase=True),
        config.seq_length,
    )
    if not run.chief:
        # Every worker takes part in saving; only the chief keeps the files.
        fileio.remove_tree(preset_dir)
        fileio.remove_tree(manager.directory)
    start_step, started_from = start
    results = {
        "global_step": global_step(model),
        "resumed_from_step": start_step,
        "init_from": started_from,
        "train_seconds_this_run": outcome.seconds,
        "eval": eval_results,
        "history_this_run": outcome.history,
        "model_dir": fileio.absolute_path(config.model_dir),
        "preset_dir": fileio.absolute_path(config.preset_dir),
        "checkpoint": outcome.final_checkpoint if run.chief else None,
        "tensorboard_dir": fileio.absolute_path(config.log_dir),
        "train_files": run.train_files,
        "eval_files": run.eval_files,
        "vocab_file": fileio.absolute_path(config.vocab_file),
        "num_replicas": run.strategy.num_replicas_in_sync,
    }
    if run.chief:
        fileio.write_json_atomically(
            os.path.join(config.model_dir, "results.json"),
            results,
            default=str,
        )
    return results


def run_pretraining(config: PretrainConfig):
    """Pre-trains (or resumes pre-training of) a TUPE masked LM.

    The named steps: `start_run` (the strategy, the flags and the
    `--init_from` preset checked, this worker's paths), the lock of
    `model_dir` (`hold_model_dir`, which creates it: a second run into it
    is refused), `add_data` (default data from the embedded Wikipedia
    sample when no `train_files` are given; the vocabulary and the shards
    checked; refused, the run leaves no `model_dir` it created),
    `pretrain_model.build_and_restore` (model, latest checkpoint in
    `<model_dir>/checkpoints`: weights, optimizer state, step; the data
    stream skips the batches already seen; without one, a new run from
    `--init_from`'s weights when given, `init_from.py`), `train` (to
    `num_train_steps`, checkpointing every `save_every` steps),
    `evaluate` (on `eval_files`) and `publish` (a float32 preset in
    `<model_dir>/preset` and `results.json`).

    Args:
        config: a `PretrainConfig`.

    Returns:
        A `PretrainingResult`.

    Raises:
        UserError: (a `ValueError`) bad input, or a Keras backend other than
            TensorFlow (checkpoints and strategies are TensorFlow's; on JAX
            or PyTorch, `fit` the masked LM on the reader: docs/training.md),
            before training starts.
        run_lock.DirectoryInUseError: (a `UserError`) another live run
            holds `model_dir`.
        run_record.ChangedRunError: (a `UserError`) a resume with other
            data settings or another optimizer than the checkpoints'
            (`run.json`).
        disk_full.DiskFullError: (a `UserError`) a write found the disk
            full; names the checkpoint a rerun resumes from.
        NonFiniteLossError: the loss became NaN/Inf (the last good checkpoint
            is kept).
        preemption.PreemptedError: SIGTERM (or a watched GCE maintenance
            event) during the training steps; the checkpoint of the step the
            run was at is saved first (every worker agrees on the step).
        multi_worker.WorkerLostError: another worker died or stopped
            answering (`multi_worker.HEARTBEAT_TIMEOUT_SECONDS`).

    Example:

    >>> config = PretrainConfig(model_dir="/tmp/tiny", num_train_steps=100)
    >>> result = run_pretraining(config)
    >>> result.results["eval"]["loss"]
    """
    require_tensorflow("Pre-training with run_pretraining")
    run = start_run(config)
    try:
        with hold_model_dir(run):
            return _pretrain(add_data(run))
    except Exception as error:
        if config.runtime.strategy == "multi_worker_mirrored" and (
            multi_worker.is_lost_worker(error)
        ):
            raise multi_worker.WorkerLostError(
                "A worker of this multi-worker run is gone or stopped "
                f"answering ({errors.first_line(error)}); "
                f"stopped. {pretrain_model.resume_note(config)} Rerun every "
                "worker with the same command."
            ) from error
        if disk_full.is_disk_full(error):
            raise disk_full.refusal(
                error,
                config.model_dir,
                f"{pretrain_model.resume_note(config)} Free space and rerun "
                "the same command.",
            ) from error
        raise


def _pretrain(run):
    """`run_pretraining` once its `--model_dir` is held."""
    previous_policy = keras.config.dtype_policy()
    keras.config.set_dtype_policy(run.config.runtime.mixed_precision)
    try:
        pretrain_model.remove_temporary_checkpoints(run.paths.checkpoint_dir)
        model, manager, start_step, start = pretrain_model.build_and_restore(
            run
        )
        started_from = run_record.check_or_record(
            run, start_step > 0, run.chief, start
        )
        train_data, eval_data = pretrain_data.make_input_fns(run)
        try:
            outcome = train(
                run, model, manager, start_step, train_data, eval_data
            )
            eval_results = evaluate(run, model, outcome, eval_data)
        except tf.errors.OpError as error:
            pretrain_data.refuse_bad_shard(error, run.config)
            raise
        results = publish(
            run,
            model,
            manager,
            (start_step, started_from),
            outcome,
            eval_results,
        )
        return PretrainingResult(
            model=model, results=results, strategy=run.strategy
        )
    finally:
        keras.config.set_dtype_policy(previous_policy)
