"""GLUE fine-tuning of a pre-trained TUPE preset (TUPE Table 2 recipe).

`run_glue(config)` carves a selection split from the training file
(`config.selection_fraction`, stratified, fixed seed), trains on the rest
at every learning rate in `config.learning_rates` x every seed, scores the
selection split after every epoch, and chooses the learning rate whose
median primary metric over seeds on it is highest (GLUE's convention on a
held-out split; the TUPE paper reports the median of several seeds). The
evaluation file(s) (GLUE's "dev", which may be another split: see
`glue.describe_split`) are predicted after each run's last epoch, and
their labels are read once, for the chosen rate's runs only.
"""

import dataclasses
import os
import time
from typing import NamedTuple

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


class PreparedGlue(NamedTuple):
    """The checked task and data of `run_glue`, before any run.

    Attributes:
        task: the `GlueTask`.
        strategy: the `tf.distribute` strategy.
        train: the training file as read.
        fit: the rows of `train` trained on.
        selection: the rows of `train` the learning rate is chosen on.
        evaluation: the evaluation split(s), scored at the chosen rate.
    """

    task: glue.GlueTask
    strategy: object
    train: glue.GlueSplit
    fit: glue.GlueSplit
    selection: glue.GlueSplit
    evaluation: list


def _predict(model, dataset):
    """The model's outputs on `dataset`, float32 whatever the compute
    dtype (for the metrics)."""
    return np.asarray(model.predict(dataset, verbose=0), np.float32)


class _SelectionEvaluator(keras.callbacks.Callback):
    """Computes the GLUE metrics on the selection split after every epoch."""

    def __init__(self, task_name, dataset, labels):
        super().__init__()
        self.task_name = task_name
        self.dataset = dataset
        self.labels = labels
        self.history = []

    def on_epoch_end(self, epoch, logs=None):
        metrics = glue_metrics.compute_glue_metrics(
            self.task_name, self.labels, _predict(self.model, self.dataset)
        )
        self.history.append({"epoch": epoch + 1, **metrics})
        logging.info("epoch %d selection split: %s", epoch + 1, metrics)


def _run_datasets(config, prepared, preprocessor, seed):
    """`(train_ds, selection_ds, eval_sets, steps_per_epoch)` of one run.

    `eval_sets` maps each evaluation split to its batches, built without
    its labels (zeros in their place): only `choose_and_evaluate` reads
    them.
    """
    tpu = config.runtime.strategy == "tpu"

    def batches(split, shuffle=False, drop_remainder=False):
        return _features(
            split,
            preprocessor,
            config.batch_size,
            shuffle,
            seed,
            drop_remainder=drop_remainder,
            pad_to_longest=config.pad_to_longest,
        )

    # TPUs need static shapes: full training batches only.
    train_ds = batches(prepared.fit, shuffle=True, drop_remainder=tpu)
    eval_sets = {
        split.split: batches(
            dataclasses.replace(split, labels=np.zeros_like(split.labels))
        )
        for split in prepared.evaluation
    }
    fit_size = len(prepared.fit)
    steps_per_epoch = (
        fit_size // config.batch_size
        if tpu
        else int(np.ceil(fit_size / config.batch_size))
    )
    return train_ds, batches(prepared.selection), eval_sets, steps_per_epoch


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


def build_run(config, prepared, learning_rate, seed):
    """`(model, train_ds, selection_ds, eval_sets)` of one run: the seeded,
    compiled classifier and its batches, before any training step."""
    keras.utils.set_random_seed(seed)
    preprocessor = preset_preprocessor(config.preset, config.seq_length)
    train_ds, selection_ds, eval_sets, steps_per_epoch = _run_datasets(
        config, prepared, preprocessor, seed
    )
    with prepared.strategy.scope():
        model = _compiled_classifier(
            config,
            prepared.task,
            next(iter(train_ds))[0],
            steps_per_epoch * config.num_epochs,
            learning_rate,
        )
    return model, train_ds, selection_ds, eval_sets


def finetune_once(config, prepared, learning_rate, seed):
    """One fine-tuning run on the fit rows.

    Returns:
        `(run, eval_outputs)`: the run's dict (selection-split metrics after
        every epoch and at the last) and its outputs on each evaluation
        split after the last epoch (`{split: array}`; their labels unread).
    """
    model, train_ds, selection_ds, eval_sets = build_run(
        config, prepared, learning_rate, seed
    )
    evaluator = _SelectionEvaluator(
        prepared.task.name, selection_ds, prepared.selection.labels
    )
    start = time.time()
    history = model.fit(
        train_ds,
        epochs=config.num_epochs,
        shuffle=False,
        callbacks=[evaluator],
        verbose=config.verbose,
    )
    run = {
        "learning_rate": learning_rate,
        "seed": seed,
        "compute_dtype": model.backbone.compute_dtype,
        "train_loss": [float(v) for v in history.history["loss"]],
        "selection_per_epoch": evaluator.history,
        "selection": {
            k: v for k, v in evaluator.history[-1].items() if k != "epoch"
        },
    }
    eval_outputs = {
        split: _predict(model, dataset) for split, dataset in eval_sets.items()
    }
    run["seconds"] = time.time() - start
    return run, eval_outputs


def _medians(dicts):
    """`{metric: median}` over dicts of the same metrics."""
    return {
        metric: float(np.median([d[metric] for d in dicts]))
        for metric in dicts[0]
    }


def summarize_runs(task_name, runs):
    """Medians over seeds per learning rate on the selection split, and the
    learning rate chosen by them.

    Args:
        task_name: GLUE task name (selects the primary metric).
        runs: dicts with `learning_rate` and `selection` (`{metric: v}`, on
            the selection split carved from the training file).

    Returns:
        `(median_by_learning_rate, chosen_learning_rate)`: medians keyed by
        `str(learning_rate)`, and the learning rate whose median primary
        metric is highest (ties: the first swept).

    Example:

    >>> runs = [{"learning_rate": 2e-5, "selection": {"accuracy": 0.8}}]
    >>> summarize_runs("sst2", runs)
    ({'2e-05': {'accuracy': 0.8}}, 2e-05)
    """
    learning_rates = list(dict.fromkeys(run["learning_rate"] for run in runs))
    by_lr = {
        str(lr): _medians(
            [run["selection"] for run in runs if run["learning_rate"] == lr]
        )
        for lr in learning_rates
    }
    primary = glue_metrics.primary_metric(task_name)
    chosen = max(learning_rates, key=lambda lr: by_lr[str(lr)][primary])
    return by_lr, chosen


def choose_and_evaluate(task_name, runs, eval_outputs, eval_labels):
    """Chooses the learning rate on the selection split, then scores the
    evaluation split(s) once, for the chosen rate's runs only.

    Args:
        task_name: GLUE task name.
        runs: the runs' dicts (`summarize_runs`); the chosen rate's get an
            `evaluation` entry (`{split: {metric: v}}`).
        eval_outputs: per run, its `{split: outputs}` on the evaluation
            split(s).
        eval_labels: `{split: labels}` of the evaluation split(s), read
            after the choice.

    Returns:
        `(median_by_learning_rate, chosen_learning_rate, evaluation)`:
        `summarize_runs`'s, and the medians over the chosen rate's seeds
        on each evaluation split.
    """
    by_lr, chosen = summarize_runs(task_name, runs)
    scored = []
    for run, outputs in zip(runs, eval_outputs):
        if run["learning_rate"] != chosen:
            continue
        run["evaluation"] = {
            split: glue_metrics.compute_glue_metrics(
                task_name, eval_labels[split], split_outputs
            )
            for split, split_outputs in outputs.items()
        }
        scored.append(run["evaluation"])
    evaluation = {
        split: _medians([e[split] for e in scored]) for split in scored[0]
    }
    return by_lr, chosen, evaluation


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
        `selection_split` (how it was carved), `runs` (every learning rate x
        seed, with per-epoch selection-split metrics; the chosen rate's with
        `evaluation`), `selection_median_by_learning_rate`,
        `chosen_learning_rate`, `evaluation` (its medians on each
        evaluation split) and `evaluation_names` (what those splits are).

    Raises:
        UserError: a Keras backend other than TensorFlow, before anything
            is read.

    Example:

    >>> results = run_glue(GlueConfig(task="cola", preset="runs/default/model/preset",
    ...                               glue_dir="glue_data", learning_rates=[2e-5],
    ...                               seeds=[0, 1, 2]))
    >>> results["evaluation"]["validation"]["matthews_corrcoef"]
    """
    require_tensorflow("GLUE fine-tuning with run_glue")
    config = dataclasses.replace(config)
    prepared = prepare_glue(config)
    task = prepared.task
    output_dir = os.path.join(config.output_dir, task.name)
    os.makedirs(output_dir, exist_ok=True)
    runs, eval_outputs = [], []
    previous_policy = keras.config.dtype_policy()
    keras.config.set_dtype_policy(config.runtime.mixed_precision)
    try:
        for learning_rate in config.learning_rates:
            for seed in config.seeds:
                print(
                    f"GLUE {task.name}: learning rate {learning_rate}, seed {seed}"
                )
                run, outputs = finetune_once(
                    config, prepared, learning_rate, seed
                )
                runs.append(run)
                eval_outputs.append(outputs)
    finally:
        keras.config.set_dtype_policy(previous_policy)
    results = _glue_results(config, prepared, runs, eval_outputs)
    path = os.path.join(output_dir, "results.json")
    fileio.write_json_atomically(path, results)
    results["results_file"] = path
    return results


def prepare_glue(config):
    """The `PreparedGlue` of `config`: the flags (unset recipe values filled
    in on `config`), the preset's tokenizer and the data checked and loaded,
    and the selection split carved from the training file, before any run.

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
    fit, selection = glue.carve_selection_split(
        train, config.selection_fraction
    )
    evaluation = [
        _load_split(config, task, split, config.max_eval_examples)
        for split in task.eval_splits
    ]
    # The tokenizer is needed by every run: refuse a bad one now.
    preset_preprocessor(config.preset, config.seq_length)
    return PreparedGlue(task, strategy, train, fit, selection, evaluation)


def _glue_results(config, prepared, runs, eval_outputs):
    """The results dict of `run_glue` (without `results_file`)."""
    task, train, evaluation = prepared.task, prepared.train, prepared.evaluation
    by_lr, chosen, scores = choose_and_evaluate(
        task.name,
        runs,
        eval_outputs,
        {split.split: split.labels for split in evaluation},
    )
    return {
        "task": task.name,
        "preset": os.path.abspath(config.preset),
        "train_source": train.source,
        "num_train_examples": len(train),
        "selection_split": {
            "fraction": config.selection_fraction,
            "seed": glue.SELECTION_SEED,
            "stratified_by": (
                f"{glue.SELECTION_REGRESSION_BINS} quantile bins of the score"
                if task.is_regression
                else "label"
            ),
            "num_fit_examples": len(prepared.fit),
            "num_selection_examples": len(prepared.selection),
        },
        "evaluation_sources": {s.split: s.source for s in evaluation},
        "evaluation_names": {
            s.split: glue.describe_split(s, config.max_eval_examples)
            for s in evaluation
        },
        "num_eval_examples": {s.split: len(s) for s in evaluation},
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
        "selection_median_by_learning_rate": by_lr,
        "chosen_learning_rate": float(chosen),
        "evaluation": scores,
    }
