"""GLUE fine-tuning of a pre-trained TUPE preset (TUPE Table 2 recipe).

`run_glue(config)` sweeps the learning rates in `config.learning_rates`,
runs every seed for each, evaluates on the task's dev split(s) after every
epoch, and reports per run, the median over seeds per learning rate, and
the best learning rate by that median (GLUE's convention; the TUPE paper
reports the median of several seeds).
"""

import dataclasses
import os
import time

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from data_pipeline import dataset_options
from data_pipeline import glue
from tupe_tf.models.preset_check import check_preset
from tupe_tf.models.preset_check import read_preset_json
from tupe_tf.models.tupe_backbone import TupeBackbone
from tupe_tf.models.tupe_text_classifier import TupeTextClassifier
from tupe_tf.models.tupe_text_classifier_preprocessor import (
    TupeTextClassifierPreprocessor,
)
from tupe_tf.training import config as config_lib
from tupe_tf.training import distribution
from tupe_tf.training import glue_metrics
from tupe_tf.training.config import GlueConfig
from tupe_tf.training.optimization import optimizer_from_config
from tupe_tf.utils import fileio
from tupe_tf.utils.backend import require_tensorflow
from tupe_tf.utils.errors import UserError


def _preset_backbone_config(preset):
    """The backbone config of `--preset`, after `check_preset`."""
    path = os.path.join(preset, "config.json")
    if not os.path.isfile(path):
        raise UserError(
            f"--preset={preset!r} is not a keras-hub preset directory (no "
            "config.json). Pass the preset written by scripts/pretrain.py "
            "(<model_dir>/preset)."
        )
    try:
        check_preset(preset)
    except UserError as error:
        raise UserError(f"--preset: {error}") from error
    return read_preset_json(preset, "config.json").get("config", {})


def _load_from_preset(cls, preset, **kwargs):
    """`cls.from_preset(preset)`, a preset that fails to load named."""
    try:
        return cls.from_preset(preset, **kwargs)
    except (OSError, ValueError, KeyError) as error:
        raise UserError(
            f"--preset={preset!r}: its {cls.__name__} cannot be loaded "
            f"({error}). Save the preset again with scripts/pretrain.py."
        ) from error


def preset_preprocessor(preset, sequence_length):
    """The preset's own classifier preprocessor at `sequence_length`.

    A preset converted from the TUPE authors' checkpoint with their BPE
    codes packs as their fine-tuning does (`<s> a </s> </s> b </s>`, pad id
    1: `TupeFairseqTextClassifierPreprocessor`, from its
    `preprocessor.json`); a tupe-tf preset packs `[CLS] a [SEP] b [SEP]`
    (`TupeTextClassifierPreprocessor`).

    Raises:
        UserError: the preset has no tokenizer, or it cannot be loaded.
    """
    if not os.path.isfile(os.path.join(preset, "tokenizer.json")):
        raise UserError(
            f"--preset={preset!r} has no tokenizer (tokenizer.json), so "
            "GLUE text cannot be tokenized. Convert the TUPE authors' "
            "checkpoint with --bpe_codes, or pass a preset of "
            "scripts/pretrain.py."
        )
    return _load_from_preset(
        TupeTextClassifierPreprocessor,
        preset,
        sequence_length=sequence_length,
    )


# Batches padded to their longest round up to this: few distinct shapes,
# so XLA compiles the step a few times, not once per batch.
PAD_MULTIPLE = 16


def _trim_to_longest(features, labels):
    """`features` cut to the batch's longest example, rounded up to
    `PAD_MULTIPLE`: the cut columns are padding, masked in attention, so
    the outputs are those of the full width."""
    mask = features["padding_mask"]
    longest = tf.reduce_max(tf.reduce_sum(tf.cast(mask, tf.int32), axis=1))
    width = tf.minimum(
        (longest + PAD_MULTIPLE - 1) // PAD_MULTIPLE * PAD_MULTIPLE,
        tf.shape(mask)[1],
    )
    return {name: value[:, :width] for name, value in features.items()}, labels


def _features(
    split,
    preprocessor,
    batch_size,
    shuffle,
    seed,
    drop_remainder=False,
    pad_to_longest=False,
):
    """Tokenised, cached, (shuffled) batches of `(features, labels)`."""
    texts = tuple(tf.constant(column) for column in split.sentences)
    inputs = texts[0] if len(texts) == 1 else texts
    dataset = tf.data.Dataset.from_tensor_slices((inputs, split.labels))
    # Tokenise once, in large batches, then cache the packed features. The
    # preprocessor must get (x, y): called on x alone it would take a
    # (first, second) pair for (x, y). Pairs become [CLS] a [SEP] b [SEP]
    # with segment ids 0 then 1.
    dataset = (
        dataset.batch(1024)
        .map(preprocessor, num_parallel_calls=tf.data.AUTOTUNE)
        .unbatch()
        .apply(tf.data.experimental.assert_cardinality(len(split)))
        .cache()
    )
    if shuffle:
        dataset = dataset.shuffle(
            len(split), seed=seed, reshuffle_each_iteration=True
        )
    dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
    if pad_to_longest:
        dataset = dataset.map(_trim_to_longest)
    return dataset_options.without_autotuning(
        dataset.prefetch(tf.data.AUTOTUNE)
    )


class _DevEvaluator(keras.callbacks.Callback):
    """Computes the GLUE metrics on the dev split(s) after every epoch."""

    def __init__(self, task_name, eval_sets):
        super().__init__()
        self.task_name = task_name
        self.eval_sets = eval_sets
        self.history = []

    def evaluate(self):
        results = {}
        for split_name, (dataset, labels) in self.eval_sets.items():
            # float32 for the metrics, whatever the compute dtype.
            outputs = np.asarray(
                self.model.predict(dataset, verbose=0), np.float32
            )
            metrics = glue_metrics.compute_glue_metrics(
                self.task_name, labels, outputs
            )
            results[split_name] = metrics
        return results

    def on_epoch_end(self, epoch, logs=None):
        results = self.evaluate()
        self.history.append({"epoch": epoch + 1, **results})
        logging.info("epoch %d dev: %s", epoch + 1, results)


def _run_datasets(config, train, eval_splits, preprocessor, seed):
    """`(train_ds, eval_sets, steps_per_epoch)` of one run.

    `eval_sets` maps each dev split to `(dataset, labels)`.
    """
    tpu = config.runtime.strategy == "tpu"
    # TPUs need static shapes: full training batches only.
    train_ds = _features(
        train,
        preprocessor,
        config.batch_size,
        True,
        seed,
        drop_remainder=tpu,
        pad_to_longest=config.pad_to_longest,
    )
    eval_sets = {
        split.split: (
            _features(
                split,
                preprocessor,
                config.batch_size,
                False,
                seed,
                pad_to_longest=config.pad_to_longest,
            ),
            split.labels,
        )
        for split in eval_splits
    }
    steps_per_epoch = (
        len(train) // config.batch_size
        if tpu
        else int(np.ceil(len(train) / config.batch_size))
    )
    return train_ds, eval_sets, steps_per_epoch


def _compiled_classifier(config, task, features, total_steps, learning_rate):
    """The preset's backbone under a new classifier head, built on
    `features` and compiled (in the caller's strategy scope)."""
    # The preset stores float32; `dtype` overrides it for mixed precision
    # (variables stay float32, compute in bfloat16/float16). The global
    # policy makes the classifier head and the functional model follow;
    # `compile` then adds loss scaling for mixed_float16.
    policy = config.runtime.mixed_precision
    backbone = _load_from_preset(TupeBackbone, config.preset, dtype=policy)
    model = TupeTextClassifier(
        backbone,
        num_classes=task.num_classes,
        preprocessor=None,
        dropout=config.dropout,
    )
    model(features)
    optimizer = optimizer_from_config(
        model, config.optimizer, total_steps, learning_rate
    )
    if task.is_regression:
        loss = keras.losses.MeanSquaredError()
        metrics = []
    else:
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        metrics = [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]
    model.compile(
        optimizer=optimizer,
        loss=loss,
        metrics=metrics,
        jit_compile=distribution.jit_compile(config.runtime),
        steps_per_execution=config.runtime.steps_per_execution,
    )
    # Built here, not in the first train step: a `tf.function` that creates
    # variables is traced twice.
    model.optimizer.build(model.trainable_variables)
    return model


def build_run(config, task, train, eval_splits, learning_rate, seed, strategy):
    """`(model, train_ds, eval_sets)` of one run: the seeded, compiled
    classifier and its batches, before any training step."""
    keras.utils.set_random_seed(seed)
    preprocessor = preset_preprocessor(config.preset, config.seq_length)
    train_ds, eval_sets, steps_per_epoch = _run_datasets(
        config, train, eval_splits, preprocessor, seed
    )
    with strategy.scope():
        model = _compiled_classifier(
            config,
            task,
            next(iter(train_ds))[0],
            steps_per_epoch * config.num_epochs,
            learning_rate,
        )
    return model, train_ds, eval_sets


def finetune_once(
    config, task, train, eval_splits, learning_rate, seed, strategy
):
    """One fine-tuning run; returns its per-epoch and final dev metrics."""
    model, train_ds, eval_sets = build_run(
        config, task, train, eval_splits, learning_rate, seed, strategy
    )
    evaluator = _DevEvaluator(task.name, eval_sets)
    start = time.time()
    history = model.fit(
        train_ds,
        epochs=config.num_epochs,
        shuffle=False,
        callbacks=[evaluator],
        verbose=config.verbose,
    )
    return {
        "learning_rate": learning_rate,
        "seed": seed,
        "compute_dtype": model.backbone.compute_dtype,
        "train_loss": [float(v) for v in history.history["loss"]],
        "dev_per_epoch": evaluator.history,
        "dev": {k: v for k, v in evaluator.history[-1].items() if k != "epoch"},
        "seconds": time.time() - start,
    }


def summarize_runs(task_name, runs):
    """Medians over seeds per learning rate, and the best learning rate.

    Args:
        task_name: GLUE task name (selects the primary metric).
        runs: dicts with `learning_rate` and `dev` (`{split: {metric: v}}`).

    Returns:
        `(median_by_learning_rate, best_learning_rate)`: medians keyed by
        `str(learning_rate)`, and the learning rate whose median primary
        metric on the first dev split is highest.

    Example:

    >>> runs = [{"learning_rate": 2e-5, "dev": {"validation": {"accuracy": 0.8}}}]
    >>> summarize_runs("sst2", runs)
    ({'2e-05': {'validation': {'accuracy': 0.8}}}, 2e-05)
    """
    by_lr = {}
    learning_rates = []
    for run in runs:
        if run["learning_rate"] not in learning_rates:
            learning_rates.append(run["learning_rate"])
    for learning_rate in learning_rates:
        lr_runs = [run for run in runs if run["learning_rate"] == learning_rate]
        by_lr[str(learning_rate)] = {
            split: {
                metric: float(
                    np.median([run["dev"][split][metric] for run in lr_runs])
                )
                for metric in lr_runs[0]["dev"][split]
            }
            for split in lr_runs[0]["dev"]
        }
    primary = glue_metrics.primary_metric(task_name)
    first_split = next(iter(runs[0]["dev"]))
    best = max(
        learning_rates, key=lambda lr: by_lr[str(lr)][first_split][primary]
    )
    return by_lr, best


def validate_glue_config(config):
    """Refuses bad `GlueConfig` values before anything is trained.

    Unset `recipe`, `learning_rates` and `num_epochs` are filled in (on
    `config`): the recipe by the preset's hidden size, the rates and
    epochs as the recipe sets them for the task
    (`config.default_finetune_recipe`).
    """
    task = glue.get_task(config.task)
    config.validate()
    if config.glue_dir and config.tfds_data_dir:
        raise UserError(
            "--tfds_data_dir is for GLUE from TFDS; with --glue_dir the TSV "
            "files are read instead. Pass one of the two."
        )
    if not config.preset:
        raise UserError(
            "--preset is required (a pre-trained preset directory)."
        )
    backbone_config = _preset_backbone_config(config.preset)
    # A preset without a hidden size gets the paper's recipe.
    hidden_dim = backbone_config.get("hidden_dim", float("inf"))
    if config.recipe is None:
        config.recipe = config_lib.default_finetune_recipe_name(hidden_dim)
    recipe = config_lib.default_finetune_recipe(
        hidden_dim, task.name, config.recipe
    )
    if config.learning_rates is None:
        config.learning_rates = list(recipe["learning_rates"])
    if config.num_epochs is None:
        config.num_epochs = recipe["num_epochs"]
    max_length = backbone_config.get("max_sequence_length")
    if max_length is not None and config.seq_length > max_length:
        raise UserError(
            f"--seq_length={config.seq_length} is above the preset's "
            f"max_sequence_length={max_length}."
        )
    if config.pad_to_longest and config.runtime.strategy == "tpu":
        raise UserError(
            "--pad_to_longest gives batches of varying length; TPUs need "
            "static shapes. Drop --pad_to_longest with --strategy=tpu."
        )
    if not config.learning_rates or not config.seeds:
        raise UserError("--learning_rates and --seeds must not be empty.")
    if config.glue_dir and not os.path.isdir(config.glue_dir):
        raise UserError(f"--glue_dir={config.glue_dir!r} is not a directory.")
    fileio.make_writable_directory(
        os.path.join(config.output_dir, task.name), "--output_dir"
    )
    return task


def _load_split(config, task, split, max_examples):
    """`glue.load_glue` of the configured source (its refusals name the
    flag or file)."""
    return glue.load_glue(
        task.name, split, config.glue_dir, config.tfds_data_dir, max_examples
    )


def run_glue(config: GlueConfig):
    """Fine-tunes a preset on one GLUE task and writes `results.json`.

    Args:
        config: a `GlueConfig`.

    Returns:
        The results dict (also written to `<output_dir>/<task>/results.json`):
        `runs` (every learning rate x seed, with per-epoch dev metrics),
        `median_by_learning_rate`, `best_learning_rate` and `best` (its
        medians).

    Raises:
        UserError: a Keras backend other than TensorFlow, before anything
            is read.

    Example:

    >>> results = run_glue(GlueConfig(task="cola", preset="runs/default/model/preset",
    ...                               glue_dir="glue_data", learning_rates=[2e-5],
    ...                               seeds=[0, 1, 2]))
    >>> results["best"]["validation"]["matthews_corrcoef"]
    """
    require_tensorflow("GLUE fine-tuning with run_glue")
    config = dataclasses.replace(config)
    task, strategy, train, eval_splits = prepare_glue(config)
    output_dir = os.path.join(config.output_dir, task.name)
    os.makedirs(output_dir, exist_ok=True)
    runs = []
    previous_policy = keras.config.dtype_policy()
    keras.config.set_dtype_policy(config.runtime.mixed_precision)
    try:
        for learning_rate in config.learning_rates:
            for seed in config.seeds:
                print(
                    f"GLUE {task.name}: learning rate {learning_rate}, seed {seed}"
                )
                runs.append(
                    finetune_once(
                        config,
                        task,
                        train,
                        eval_splits,
                        learning_rate,
                        seed,
                        strategy,
                    )
                )
    finally:
        keras.config.set_dtype_policy(previous_policy)
    results = _glue_results(config, task, train, eval_splits, runs)
    path = os.path.join(output_dir, "results.json")
    fileio.write_json_atomically(path, results)
    results["results_file"] = path
    return results


def prepare_glue(config):
    """`(task, strategy, train, eval_splits)`: the flags (unset recipe
    values filled in on `config`), the preset's tokenizer and the data
    checked and loaded, before any run.

    Raises:
        UserError: naming the flag or file.
    """
    # Flags first: a bad value is refused before any device is set up.
    task = validate_glue_config(config)
    strategy = distribution.create_strategy(
        config.runtime.strategy,
        tpu=config.runtime.tpu,
        num_cpu_devices=config.runtime.num_cpu_devices,
    )
    train = _load_split(config, task, "train", config.max_train_examples)
    eval_splits = [
        _load_split(config, task, split, config.max_eval_examples)
        for split in task.eval_splits
    ]
    # The tokenizer is needed by every run: refuse a bad one now.
    preset_preprocessor(config.preset, config.seq_length)
    return task, strategy, train, eval_splits


def _glue_results(config, task, train, eval_splits, runs):
    """The results dict of `run_glue` (without `results_file`)."""
    by_lr, best_lr = summarize_runs(task.name, runs)
    return {
        "task": task.name,
        "preset": os.path.abspath(config.preset),
        "train_source": train.source,
        "eval_sources": {split.split: split.source for split in eval_splits},
        "num_train_examples": len(train),
        "num_eval_examples": {split.split: len(split) for split in eval_splits},
        "recipe": {
            "name": config.recipe,
            "batch_size": config.batch_size,
            "num_epochs": config.num_epochs,
            **{
                name: getattr(config.optimizer, name)
                for name in config_lib.PAPER_FINETUNE_OPTIMIZER
            },
            "seq_length": config.seq_length,
            "learning_rates": list(config.learning_rates),
            "seeds": list(config.seeds),
            "mixed_precision": config.runtime.mixed_precision,
        },
        "primary_metric": glue_metrics.primary_metric(task.name),
        "runs": runs,
        "median_by_learning_rate": by_lr,
        "best_learning_rate": float(best_lr),
        "best": by_lr[str(best_lr)],
    }
