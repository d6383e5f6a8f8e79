"""The model of a pre-training run: building, compiling, restoring, saving.

Step "model" of `tupe_tf.training.pretrain.run_pretraining` (the masked LM
under the run's strategy, resumed from the latest checkpoint) and the
float32 keras-hub preset that step "publish" writes.
"""

import dataclasses
import os
import warnings

import keras
import tensorflow as tf
from absl import logging

from tupe_tf.models.tupe_backbone import TupeBackbone
from tupe_tf.models.tupe_masked_lm import TupeMaskedLM
from tupe_tf.models.tupe_masked_lm_preprocessor import TupeMaskedLMPreprocessor
from tupe_tf.training import config as config_lib
from tupe_tf.training import distribution
from tupe_tf.training import init_from
from tupe_tf.training.callbacks import global_step
from tupe_tf.training.gradient_accumulation import GradientAccumulation
from tupe_tf.training.optimization import optimizer_from_config
from tupe_tf.utils import errors
from tupe_tf.utils import fileio
from tupe_tf.utils.errors import UserError


def build_masked_lm(config, vocabulary_size):
    """An uncompiled `tupe_tf.TupeMaskedLM` for `config.model`."""
    backbone = TupeBackbone(**config.model.backbone_kwargs(vocabulary_size))
    model = TupeMaskedLM(backbone, preprocessor=None)
    if keras.config.dtype_policy().name.startswith("mixed"):
        # keras-hub 0.32's MaskedLMHead (autocast=False) adds its float32 bias
        # to float16/bfloat16 logits and fails; a float32 head works and keeps
        # the vocabulary logits and softmax in float32, as mixed precision
        # recommends for the output layer.
        model.masked_lm_head.dtype_policy = keras.DTypePolicy("float32")
    return model


def dummy_batch(config, batch_size=1):
    """An all-zero batch of `config.seq_length` that builds the model."""
    num_predictions = config.max_predictions_per_seq or 1
    return {
        "token_ids": tf.zeros((batch_size, config.seq_length), tf.int32),
        "segment_ids": tf.zeros((batch_size, config.seq_length), tf.int32),
        "padding_mask": tf.ones((batch_size, config.seq_length), tf.int32),
        "mask_positions": tf.zeros((batch_size, num_predictions), tf.int32),
    }


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


def compile_masked_lm(model, config):
    """Builds the model's variables and compiles it for pre-training.

    Without `config.optimizer.learning_rate`, the model size's default
    peak rate (`resolve_learning_rate`).
    """
    model(dummy_batch(config), training=False)
    opt = resolve_learning_rate(config).optimizer
    optimizer = optimizer_from_config(
        model, opt, config.num_train_steps, opt.learning_rate
    )
    model.compile(
        optimizer=optimizer,
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        weighted_metrics=[
            keras.metrics.SparseCategoricalAccuracy(name="mlm_accuracy")
        ],
        jit_compile=distribution.jit_compile(config.runtime),
        steps_per_execution=config.runtime.steps_per_execution,
    )
    if config.gradient_accumulation_steps > 1:
        GradientAccumulation(
            model, config.gradient_accumulation_steps
        ).install()
    # Optimizer slots must exist before a checkpoint is restored into them.
    model.optimizer.build(model.trainable_variables)
    return model


def build_and_restore(run):
    """Step "model": the compiled masked LM, restored from the latest
    checkpoint when there is one, else (with `--init_from`) holding the
    weights of `run.init_source` (`init_from.initialize`).

    Args:
        run: a `tupe_tf.training.pretrain.PretrainingRun`.

    Returns:
        `(model, manager, start_step, start)`: the model, its
        `tf.train.CheckpointManager`, the step training starts from and
        the `--init_from` record of a new run (`None` otherwise).
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
        run.paths.checkpoint_dir,
        max_to_keep=config.keep_checkpoints,
    )
    # The chief's directory holds the real checkpoints on every worker.
    latest = restore_latest_checkpoint(checkpoint, config)
    start = None
    if latest:
        print(f"Resumed from {latest}", flush=True)
    elif run.init_source is not None:
        start = init_from.initialize(model, run.init_source)
        print(
            f"Initialised from {start['preset']} ({start['kind']}; grown "
            f"tables: {start['grown_tables'] or 'none'}; "
            f"{len(start['new_variables'])} new variables)",
            flush=True,
        )
    return model, manager, global_step(model), start


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
        raise UserError(
            f"--model_dir={config.model_dir!r}: {what} cannot be restored "
            f"({errors.first_line(error)}). It is "
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


def resume_note(config):
    """Which complete checkpoint a rerun of `config` resumes from."""
    latest = tf.train.latest_checkpoint(config.checkpoint_dir)
    if latest is None:
        return "No checkpoint was complete yet: a rerun starts from step 0."
    step = latest.rsplit("-", 1)[-1]
    return (
        "A rerun resumes from the last complete checkpoint, "
        f"{latest} (step {step})."
    )


def remove_temporary_checkpoints(directory):
    """Removes the `ckpt-<N>_temp*` directories a checkpoint save left when
    it failed (a full disk) or was killed; the run holds `--model_dir`, so
    no save of another run is under way."""
    for path in tf.io.gfile.glob(os.path.join(directory, "ckpt-*_temp*")):
        logging.warning(
            "Removing %s, left by a checkpoint save that failed.", path
        )
        if tf.io.gfile.isdir(path):
            tf.io.gfile.rmtree(path)
        else:
            tf.io.gfile.remove(path)


def float32_model(model, config, vocabulary_size):
    """`model` itself under float32, else a float32 copy of its weights
    (the preset is float32, whatever the training policy was)."""
    if config.runtime.mixed_precision == "float32":
        return model
    keras.config.set_dtype_policy("float32")
    copy = build_masked_lm(config, vocabulary_size)
    copy(dummy_batch(config), training=False)
    copy.set_weights(model.get_weights())
    return copy


def save_preset_atomically(model, preset_dir, tokenizer_fn, seq_length):
    """Saves `model` as a keras-hub preset via a temporary directory.

    The preset appears at `preset_dir` complete or not at all; an existing
    preset is replaced only once the new one is fully written. On a URL
    (`gs://...`), which keras-hub's local file calls cannot write, it is
    saved to a local temporary directory, uploaded once complete and moved
    into place file by file: each file whole, the directory not at one
    instant (`fileio.atomic_directory`).
    """
    previous = model.preprocessor
    with fileio.atomic_directory(preset_dir, overwrite=True) as tmp_dir:
        try:
            model.preprocessor = TupeMaskedLMPreprocessor(
                tokenizer_fn(), sequence_length=seq_length
            )
            model.save_to_preset(tmp_dir)
        finally:
            model.preprocessor = previous
    return preset_dir
