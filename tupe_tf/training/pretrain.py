"""Masked-LM pre-training of a `TupeBackbone` with `model.fit`.

`run_pretraining(config)` is the library entry point behind
`scripts/pretrain.py`. It validates everything that can be wrong before the
first step, builds (or resumes) the model under the requested
`tf.distribute` strategy, trains with `model.fit` (or, under
`MultiWorkerMirroredStrategy`, with `DistributedTrainingLoop`), evaluates,
and writes a keras-hub preset.
"""

import dataclasses
import json
import math
import os
import re
import shutil
import time
import warnings

import keras
import tensorflow as tf

from tupe_tf.training import config as config_lib
from tupe_tf.training import distribution
from tupe_tf.training.callbacks import CheckpointSaver
from tupe_tf.training.callbacks import NonFiniteLossGuard
from tupe_tf.training.callbacks import TrainingLogger
from tupe_tf.training.callbacks import global_step
from tupe_tf.training.config import PretrainConfig
from tupe_tf.training.multi_worker import DistributedTrainingLoop
from tupe_tf.training.optimization import create_optimizer
from tupe_tf.utils import fileio
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


def _expand_patterns(patterns, flag):
    # tf.io.gfile also reads remote paths (gs://...).
    return fileio.expand_patterns(
        patterns, flag, glob_fn=tf.io.gfile.glob, exists_fn=tf.io.gfile.exists
    )


def check_writable_dir(directory, flag="--model_dir"):
    """Raises `UserError` naming `flag` if `directory` cannot be
    written.

    Creates `directory` (remote paths included) and writes and removes a
    probe file in it.
    """
    try:
        tf.io.gfile.makedirs(directory)
        probe = os.path.join(directory, f".write_probe_{os.getpid()}")
        with tf.io.gfile.GFile(probe, "w") as f:
            f.write("ok")
        tf.io.gfile.remove(probe)
    except (OSError, tf.errors.OpError) as error:
        raise UserError(
            f"{flag}={directory!r} is not writable: {error}"
        ) from error


def validate_config(config, strategy=None):
    """Checks a `PretrainConfig` before anything is trained.

    Raises `ValueError` with the offending flag named. Also checks the
    shards against `--vocab_file` and `--seq_length` when they are given.

    Args:
        config: a `PretrainConfig` (with data files resolved).
        strategy: if given, the global batch is checked against its replicas.
    """
    config.model.validate()
    config.runtime.validate()
    if config.seq_length > config.model.max_sequence_length:
        raise ValueError(
            f"--seq_length={config.seq_length} is above the model's "
            f"max_sequence_length={config.model.max_sequence_length} "
            "(--max_sequence_length). Lower --seq_length or raise "
            "--max_sequence_length."
        )
    for flag in ("num_train_steps", "save_every", "eval_steps", "log_every"):
        if getattr(config, flag) <= 0:
            raise ValueError(
                f"--{flag}={getattr(config, flag)} must be positive."
            )
    if config.eval_every < 0:
        raise ValueError(
            f"--eval_every={config.eval_every} must be >= 0 (0: evaluate at "
            "the end only)."
        )
    config.optimizer.resolve_warmup_steps(config.num_train_steps)
    check_writable_dir(config.model_dir)
    _check_vocabulary_file(config.vocab_file)
    train_files = _expand_patterns(config.train_files, "--train_files")
    eval_files = _expand_patterns(config.eval_files, "--eval_files")
    if not train_files:
        raise ValueError("--train_files is empty.")
    _check_shards(train_files, "--train_files", config)
    if eval_files:
        _check_shards(eval_files, "--eval_files", config)
    if strategy is not None:
        distribution.per_replica_batch_size(config.global_batch_size, strategy)


def _check_vocabulary_file(vocab_file):
    import data_pipeline

    if not vocab_file or not tf.io.gfile.exists(vocab_file):
        raise ValueError(f"--vocab_file={vocab_file!r} does not exist.")
    try:
        data_pipeline.load_vocabulary(vocab_file)
    except (ValueError, OSError) as error:
        raise ValueError(
            f"--vocab_file={vocab_file!r} is not a usable vocabulary: "
            f"{_sentence(error)} Pass the vocabulary the shards were built with "
            "(scripts/build_vocab.py writes one)."
        ) from error


def _sentence(error):
    """`error`'s message ending with one period."""
    return str(error).rstrip(". ") + "."


def _check_shards(files, flag, config):
    import data_pipeline

    try:
        check = data_pipeline.verify_shards(files, verify="size")
    except (ValueError, OSError) as error:
        raise ValueError(
            f"{flag}: {_sentence(error)} Pass shards written by "
            "scripts/build_shards.py (their directory holds manifest.json)."
        ) from error
    if check.bad_shards and not config.skip_bad_shards:
        listing = "; ".join(f"{p}: {r}" for p, r in check.bad_shards)
        raise ValueError(
            f"{flag}: {len(check.bad_shards)} bad shard(s): {listing}. "
            "Rebuild them, or pass --skip_bad_shards to train without them."
        )
    if not check.files:
        raise ValueError(
            f"{flag}: no readable shard left, every one is bad: "
            f"{check.bad_shards[0][0]}: {check.bad_shards[0][1]}"
            f"{' (and more)' if len(check.bad_shards) > 1 else ''}. Rebuild "
            "them with scripts/build_shards.py."
        )
    try:
        data_pipeline.check_shards_vocabulary(files, config.vocab_file)
    except (ValueError, OSError) as error:
        raise ValueError(
            f"{flag} were not built with --vocab_file={config.vocab_file}: {error}"
        ) from error
    shard_length = _shard_seq_length(files)
    # Shorter shards are padded by the reader; longer ones cannot be cut.
    if shard_length is not None and shard_length > config.seq_length:
        raise ValueError(
            f"{flag} hold sequences of length {shard_length}, longer than "
            f"--seq_length={config.seq_length}. Rebuild the shards with "
            f"--max_seq_length={config.seq_length} or pass "
            f"--seq_length={shard_length}."
        )


def _shard_seq_length(files):
    import data_pipeline

    for directory in sorted({os.path.dirname(f) for f in files}):
        try:
            manifest = data_pipeline.read_manifest(directory)
        except (OSError, ValueError, tf.errors.OpError):
            continue
        if manifest:
            for key in ("max_seq_length", "seq_length", "sequence_length"):
                if key in manifest:
                    return int(manifest[key])
    return None


def build_masked_lm(config, vocabulary_size):
    """An uncompiled `tupe_tf.TupeMaskedLM` for `config.model`."""
    import tupe_tf

    backbone = tupe_tf.TupeBackbone(
        **config.model.backbone_kwargs(vocabulary_size)
    )
    model = tupe_tf.TupeMaskedLM(backbone, preprocessor=None)
    if keras.config.dtype_policy().name.startswith("mixed"):
        # keras-hub 0.32's MaskedLMHead (autocast=False) adds its float32 bias
        # to float16/bfloat16 logits and fails; a float32 head works and keeps
        # the vocabulary logits and softmax in float32, as mixed precision
        # recommends for the output layer.
        model.masked_lm_head.dtype_policy = keras.DTypePolicy("float32")
    return model


def _dummy_batch(config, batch_size=1):
    num_predictions = config.max_predictions_per_seq or 1
    return {
        "token_ids": tf.zeros((batch_size, config.seq_length), tf.int32),
        "segment_ids": tf.zeros((batch_size, config.seq_length), tf.int32),
        "padding_mask": tf.ones((batch_size, config.seq_length), tf.int32),
        "mask_positions": tf.zeros((batch_size, num_predictions), tf.int32),
    }


def compile_masked_lm(model, config):
    """Builds the model's variables and compiles it for pre-training.

    Without `config.optimizer.learning_rate`, the model size's default
    peak rate (`resolve_learning_rate`).
    """
    model(_dummy_batch(config), training=False)
    opt = resolve_learning_rate(config).optimizer
    optimizer = create_optimizer(
        model,
        num_train_steps=config.num_train_steps,
        learning_rate=opt.learning_rate,
        warmup_steps=opt.resolve_warmup_steps(config.num_train_steps),
        weight_decay=opt.weight_decay,
        beta_1=opt.beta_1,
        beta_2=opt.beta_2,
        epsilon=opt.epsilon,
        clipnorm=opt.clipnorm,
    )
    model.compile(
        optimizer=optimizer,
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        weighted_metrics=[
            keras.metrics.SparseCategoricalAccuracy(name="mlm_accuracy")
        ],
        jit_compile=config.runtime.jit_compile,
        steps_per_execution=config.runtime.steps_per_execution,
    )
    # Optimizer slots must exist before a checkpoint is restored into them.
    model.optimizer.build(model.trainable_variables)
    return model


def make_dataset(
    config, files, batch_size, is_training, skip_batches=0, input_context=None
):
    """The MLM dataset; training data repeats and starts `skip_batches` in.

    Evaluation data is one deterministic pass, repeated and cut to
    `config.eval_steps` batches so every worker runs the same number of steps.
    """
    import data_pipeline

    dataset = data_pipeline.pretraining_dataset(
        files,
        config.vocab_file,
        config.seq_length,
        batch_size,
        max_predictions_per_seq=config.max_predictions_per_seq,
        mask_rate=config.mask_rate,
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


def _fit_segments(step, total, every):
    """Splits steps [step, total) into (steps_per_epoch, num_epochs) runs.

    Epochs end on multiples of `every` (checkpoint boundaries); a resumed or
    uneven run gets a short first or last epoch.
    """
    segments = []
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


def save_preset_atomically(model, preset_dir, tokenizer_fn, seq_length):
    """Saves `model` as a keras-hub preset via a temporary directory.

    The preset appears at `preset_dir` complete or not at all; an existing
    preset is replaced only once the new one is fully written.
    """
    import tupe_tf

    previous = model.preprocessor
    with fileio.atomic_directory(preset_dir, overwrite=True) as tmp_dir:
        try:
            model.preprocessor = tupe_tf.TupeMaskedLMPreprocessor(
                tokenizer_fn(), sequence_length=seq_length
            )
            model.save_to_preset(tmp_dir)
        finally:
            model.preprocessor = previous
    return preset_dir


@dataclasses.dataclass
class PretrainingRun:
    """What the steps of `run_pretraining` share, fixed by `prepare_run`.

    Args:
        config: the `PretrainConfig`, data files resolved.
        strategy: the `tf.distribute.Strategy`.
        train_files, eval_files: the expanded shard paths.
        vocabulary_size: tokens in `config.vocab_file`.
    """

    config: PretrainConfig
    strategy: tf.distribute.Strategy
    train_files: list
    eval_files: list
    vocabulary_size: int

    @property
    def chief(self):
        return distribution.is_chief(self.strategy)

    @property
    def multi_worker(self):
        return self.config.runtime.strategy == "multi_worker_mirrored"


def resolve_default_data(config):
    """Step "data": without `train_files`, the embedded-corpus default data.

    Returns `config` itself when it names its shards, else a copy whose
    `train_files`, `eval_files` and `vocab_file` are the default data built
    (or reused) under `config.work_dir`.
    """
    if config.train_files:
        return config
    from data_pipeline import default_data

    check_writable_dir(config.work_dir, "--work_dir")
    data = default_data.prepare_default_data(
        config.work_dir, seq_length=config.seq_length
    )
    return dataclasses.replace(
        config,
        train_files=data.train_files,
        eval_files=data.eval_files,
        vocab_file=data.vocab_file,
    )


def resolve_learning_rate(config):
    """Without `--learning_rate`, the model size's default peak rate.

    Returns `config` itself when the rate is given, else a copy with
    `config_lib.default_pretrain_learning_rate` of the model's hidden size.
    """
    if config.optimizer.learning_rate is not None:
        return config
    hidden_dim = config.model.dims()["hidden_dim"]
    return dataclasses.replace(
        config,
        optimizer=dataclasses.replace(
            config.optimizer,
            learning_rate=config_lib.default_pretrain_learning_rate(hidden_dim),
        ),
    )


def prepare_run(config):
    """Steps "strategy", "data" and "validate": a checked `PretrainingRun`.

    Raises:
        UserError: naming the bad flag or file; nothing trained.
    """
    runtime = config.runtime
    try:
        # The strategy comes first: logical CPU devices must be configured
        # before anything (including the data checks) initialises TF.
        strategy = distribution.create_strategy(
            runtime.strategy,
            tpu=runtime.tpu,
            num_cpu_devices=runtime.num_cpu_devices,
        )
        config = resolve_default_data(config)
        validate_config(config, strategy)
        config = resolve_learning_rate(config)
    except UserError:
        raise
    except ValueError as error:
        raise UserError(str(error)) from error
    return PretrainingRun(
        config=config,
        strategy=strategy,
        train_files=_expand_patterns(config.train_files, "--train_files"),
        eval_files=_expand_patterns(config.eval_files, "--eval_files"),
        vocabulary_size=_vocabulary_size(config.vocab_file),
    )


def build_and_restore(run):
    """Step "model": the compiled masked LM, restored from the latest
    checkpoint when there is one.

    Returns:
        `(model, manager, start_step)`: the model, its
        `tf.train.CheckpointManager` and the step training starts from.
    """
    config, strategy = run.config, run.strategy
    # Same seed, same initial weights (and dropout streams) on every worker
    # and every rerun.
    keras.utils.set_random_seed(config.seed)
    # The masked LM does not use the pooler, so it gets no gradient.
    warnings.filterwarnings(
        "ignore",
        message=r"Gradients do not exist for variables \['pooled_dense",
    )
    with strategy.scope():
        model = build_masked_lm(config, run.vocabulary_size)
        compile_masked_lm(model, config)
    checkpoint = tf.train.Checkpoint(model=model, optimizer=model.optimizer)
    manager = tf.train.CheckpointManager(
        checkpoint,
        distribution.worker_dir(config.checkpoint_dir, strategy),
        max_to_keep=config.keep_checkpoints,
    )
    # The chief's directory holds the real checkpoints on every worker.
    latest = restore_latest_checkpoint(checkpoint, config)
    if latest:
        print(f"Resumed from {latest}", flush=True)
    return model, manager, global_step(model)


def restore_latest_checkpoint(checkpoint, config):
    """Restores the latest checkpoint of `config.checkpoint_dir`, if any.

    Returns:
        Its path, or `None` when there is none (a fresh start).

    Raises:
        UserError: the index or the checkpoint is unreadable, or
            written by a different model; nothing on disk is changed.
    """
    directory = config.checkpoint_dir
    what = f"the checkpoint index {os.path.join(directory, 'checkpoint')}"
    try:
        latest = tf.train.latest_checkpoint(directory)
        if latest:
            what = f"checkpoint {latest}"
            checkpoint.restore(latest).assert_existing_objects_matched()
    except (tf.errors.OpError, ValueError, AssertionError) as error:
        reason = str(getattr(error, "message", error)).strip().splitlines()
        raise UserError(
            f"--model_dir={config.model_dir!r}: {what} cannot be restored "
            f"({reason[0] if reason else type(error).__name__}). It is "
            "damaged, or was written by a model with other flags. Nothing "
            "was changed: rerun with the flags of the first run, restore "
            "the checkpoint files, or pass a new --model_dir to start over."
        ) from error
    if latest is None:
        found = sorted(
            os.path.basename(path)[: -len(".index")]
            for path in tf.io.gfile.glob(
                os.path.join(directory, "ckpt-*.index")
            )
        )
        if found:
            # Starting over would overwrite them.
            raise UserError(
                f"--model_dir={config.model_dir!r}: {what} is missing, "
                "unreadable or names a checkpoint that is gone, but the "
                f"directory holds {', '.join(found)}. Nothing was changed: "
                "restore the index file, or pass a new --model_dir to start "
                "over."
            )
    return latest


def eval_interval_epochs(config):
    """Evaluation runs at checkpoint boundaries: every this many "epochs"
    (of `save_every` steps), the first boundary at or after `eval_every`
    steps; 0 when evaluation is at the end only."""
    if not config.eval_every:
        return 0
    return -(-config.eval_every // config.save_every)


def make_input_fns(run):
    """`(train_data(skip_batches), eval_data())` for `run`'s strategy.

    Under `MultiWorkerMirroredStrategy` each worker reads its own part of
    the files with its per-replica batch; elsewhere the global batch is read
    once. `eval_data()` is `None` without `eval_files`.
    """
    config, strategy = run.config, run.strategy
    per_replica = distribution.per_replica_batch_size(
        config.global_batch_size, strategy
    )

    def data(files, is_training, skip=0):
        if not run.multi_worker:
            return make_dataset(
                config, files, config.global_batch_size, is_training, skip
            )
        return strategy.distribute_datasets_from_function(
            lambda ctx: make_dataset(
                config,
                files,
                per_replica,
                is_training,
                skip * (ctx.num_replicas_in_sync // ctx.num_input_pipelines),
                input_context=ctx,
            )
        )

    def train_data(skip):
        return data(run.train_files, True, skip)

    def eval_data():
        return data(run.eval_files, False) if run.eval_files else None

    return train_data, eval_data


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
    `model.fit`. Ends with a final checkpoint.
    """
    config = run.config
    saver = CheckpointSaver(manager)
    callbacks = [NonFiniteLossGuard(manager), saver]
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
        loop = DistributedTrainingLoop(model, run.strategy, verbose)
    start_time = time.time()
    history = {}
    step = start_step
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
    saver.set_model(model)
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


def float32_model(model, run):
    """`model` itself under float32, else a float32 copy of its weights
    (the preset is float32, whatever the training policy was)."""
    if run.config.runtime.mixed_precision == "float32":
        return model
    keras.config.set_dtype_policy("float32")
    copy = build_masked_lm(run.config, run.vocabulary_size)
    copy(_dummy_batch(run.config), training=False)
    copy.set_weights(model.get_weights())
    return copy


def publish(run, model, manager, start_step, outcome, eval_results):
    """Step "publish": the float32 preset and, on the chief,
    `results.json`; returns the results dict."""
    import tupe_tf

    config = run.config
    preset_dir = distribution.worker_dir(config.preset_dir, run.strategy)
    save_preset_atomically(
        float32_model(model, run),
        preset_dir,
        lambda: tupe_tf.TupeTokenizer(
            vocabulary=config.vocab_file, lowercase=True
        ),
        config.seq_length,
    )
    if not run.chief:
        # Every worker takes part in saving; only the chief keeps the files.
        shutil.rmtree(preset_dir, ignore_errors=True)
        shutil.rmtree(manager.directory, ignore_errors=True)
    results = {
        "global_step": global_step(model),
        "resumed_from_step": start_step,
        "train_seconds_this_run": outcome.seconds,
        "eval": eval_results,
        "history_this_run": outcome.history,
        "model_dir": os.path.abspath(config.model_dir),
        "preset_dir": os.path.abspath(config.preset_dir),
        "checkpoint": outcome.final_checkpoint if run.chief else None,
        "tensorboard_dir": os.path.abspath(config.log_dir),
        "train_files": run.train_files,
        "eval_files": run.eval_files,
        "vocab_file": os.path.abspath(config.vocab_file),
        "num_replicas": run.strategy.num_replicas_in_sync,
    }
    if run.chief:
        _write_json(os.path.join(config.model_dir, "results.json"), results)
    return results


def run_pretraining(config: PretrainConfig):
    """Pre-trains (or resumes pre-training of) a TUPE masked LM.

    The named steps, each a function of this module: `prepare_run`
    (strategy, default data from the embedded Wikipedia sample when no
    `train_files` are given, validation of every input), `build_and_restore`
    (model, latest checkpoint in `<model_dir>/checkpoints`: weights,
    optimizer state, step; the data stream skips the batches already seen),
    `train` (to `num_train_steps`, checkpointing every `save_every` steps),
    `evaluate` (on `eval_files`) and `publish` (a float32 preset in
    `<model_dir>/preset` and `results.json`).

    Args:
        config: a `PretrainConfig`.

    Returns:
        A `PretrainingResult`.

    Raises:
        UserError: (a `ValueError`) bad input, before training starts.
        NonFiniteLossError: the loss became NaN/Inf (the last good checkpoint
            is kept).

    Example:

    >>> config = PretrainConfig(model_dir="/tmp/tiny", num_train_steps=100)
    >>> result = run_pretraining(config)
    >>> result.results["eval"]["loss"]
    """
    run = prepare_run(config)
    previous_policy = keras.config.dtype_policy()
    keras.config.set_dtype_policy(run.config.runtime.mixed_precision)
    try:
        model, manager, start_step = build_and_restore(run)
        if run.chief:
            _write_json(
                os.path.join(run.config.model_dir, "config.json"),
                run.config.to_dict(),
            )
        train_data, eval_data = make_input_fns(run)
        try:
            outcome = train(
                run, model, manager, start_step, train_data, eval_data
            )
            eval_results = evaluate(run, model, outcome, eval_data)
        except tf.errors.OpError as error:
            refuse_bad_shard(error, run.config)
            raise
        results = publish(
            run, model, manager, start_step, outcome, eval_results
        )
        return PretrainingResult(
            model=model, results=results, strategy=run.strategy
        )
    finally:
        keras.config.set_dtype_policy(previous_policy)


# The reader names a shard that turns out truncated or corrupted while read
# in a `tf.debugging.Assert` message that ends with its override.
_BAD_SHARD_ASSERTION = re.compile(
    r"assertion failed: \[(.*?skip_bad_shards.*?)\]", re.DOTALL
)


def refuse_bad_shard(error, config):
    """Turns the reader's bad-shard assertion into an `UserError`.

    Args:
        error: a `tf.errors.OpError` raised while training or evaluating.
        config: the run's `PretrainConfig`.

    Raises:
        UserError: naming the shard, `--skip_bad_shards` and the
            checkpoint training resumes from, if `error` is the reader's;
            otherwise nothing is raised.
    """
    match = _BAD_SHARD_ASSERTION.search(error.message or "")
    if match is None:
        return
    message = match.group(1).strip()
    message = message.replace("skip_bad_shards=True", "--skip_bad_shards")
    latest = tf.train.latest_checkpoint(config.checkpoint_dir)
    kept = (
        f"the last checkpoint, {latest}, is kept and a rerun resumes from it"
        if latest
        else "no checkpoint had been written yet"
    )
    raise UserError(f"{message} Training stopped; {kept}.") from error


def _vocabulary_size(vocab_file):
    with tf.io.gfile.GFile(vocab_file) as f:
        return sum(1 for line in f if line.rstrip("\n"))


def _write_json(path, obj):
    fileio.write_text_atomically(path, json.dumps(obj, indent=2, default=str))
