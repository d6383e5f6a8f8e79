"""Running the position probes: one record per (task, variant, seed).

`run_probes` runs what is missing, one run at a time, seeds outermost (so
a stopped suite has whole seeds of every task and variant); each finished
run writes its JSON record atomically, and a rerun skips the runs whose
record exists. A run trains a probe model from scratch at length `L` on
training-text examples and scores it on held-out examples at `L, 2L, 4L,
8L`:

- the options that run at any length (`PositionEncoding.length_free`) get
  an `accuracy` at every length; `rope` also with each length scaling
  (`rope_scaled_accuracy`, as the study's held-out losses past the tables);
- the options with a learned table (`bert`, `tupe-*`, `diet-*`, ...) have
  trained rows up to `L` only: past `L` their `accuracy` is not applicable
  (the reason is recorded); the record keeps, apart, what they score there
  with the rows as initialised (`untrained_rows_accuracy`) and refilled by
  the study's context-extension rule without training
  (`refilled_accuracy`, `context_extension.copy_weights`);
- `nope`, which has no position information, gets a `leak_check`: the
  lengths where it beats the position-blind chance by more than a binomial
  margin (none, unless a probe leaks positions another way).

Example:

>>> from tupe_tf.analysis.probe_config import ProbeConfig
>>> result = run_probes(ProbeConfig(max_runs=1))  # doctest: +SKIP
"""

import json
import math
import os
import resource
import time

from tupe_tf.analysis import probe_model
from tupe_tf.analysis import probe_tasks
from tupe_tf.analysis import study_records
from tupe_tf.analysis.probe_data import prepare_probe_text
from tupe_tf.analysis.study_beyond_table import is_length_free
from tupe_tf.analysis.study_beyond_table import scalings
from tupe_tf.analysis.study_config import VARIANTS
from tupe_tf.utils import fileio
from tupe_tf.utils.errors import UserError
from tupe_tf.version import __version__

# Variants without any position information: the probes' leak check.
POSITION_BLIND = ("nope",)
# A position-blind model beating chance by this many standard errors of
# a binomial proportion fails the leak check.
LEAK_SIGMAS = 3.0


def leak_threshold(chance, num_examples):
    """Chance plus `LEAK_SIGMAS` binomial standard errors (conservative:
    one trial per example, though copy and passkey score several)."""
    error = math.sqrt(chance * (1.0 - chance) / num_examples)
    return chance + LEAK_SIGMAS * error


def not_applicable_reason(variant, length):
    """Why a table-bound variant has no accuracy at `length`."""
    return (
        f"{variant} learns one table row (or offset) per position, and "
        f"training at length {length} leaves the rows past it untrained: "
        "see untrained_rows_accuracy and refilled_accuracy"
    )


def _cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class _Scorer:
    """Scores models of one run on its held-out examples of each length."""

    def __init__(self, config, text, task, seed):
        self.examples = {
            n: probe_tasks.make_examples(
                task,
                text,
                n,
                config.eval_examples,
                seed,
                "heldout",
                **config.task_options(task),
            )
            for n in config.eval_lengths
        }

    def chance(self):
        return {str(n): e.chance for n, e in self.examples.items()}

    def score(self, model, lengths):
        """`({length: accuracy}, {length: whole-row accuracy})`."""
        predict = probe_model.prediction_function(model)
        scores = {
            str(n): probe_model.accuracies(predict, self.examples[n])
            for n in lengths
        }
        return (
            {n: s[0] for n, s in scores.items()},
            {n: s[1] for n, s in scores.items()},
        )


def _rebuilt(config, task, arguments, model, overrides, trained_length=None):
    """The probe model rebuilt with changed backbone arguments, its weights
    copied by path (tables refilled past `trained_length`)."""
    from tupe_tf.models.context_extension import copy_weights

    target = probe_model.build_probe_model(
        task, {**arguments, **overrides}, config.copy_pool_size
    )
    copy_weights(model, target, trained_length)
    return target


def _rope_scaling_arguments(scaling, length, trained_length):
    arguments = {
        "rope_scaling": scaling,
        "rope_scaling_factor": length / trained_length,
    }
    if scaling == "yarn":
        arguments["rope_trained_length"] = trained_length
    return arguments


def _longer_scores(config, task, variant, arguments, model, scorer):
    """The record's fields past `L` that are not `accuracy`."""
    length = config.seq_length
    longer = [n for n in config.eval_lengths if n > length]
    fields = {}
    if not is_length_free(variant):
        fields["untrained_rows_accuracy"] = scorer.score(model, longer)[0]
        refilled = _rebuilt(config, task, arguments, model, {}, length)
        fields["refilled_accuracy"] = scorer.score(refilled, longer)[0]
    scaled = {}
    for scaling in scalings(variant):
        scaled[scaling] = {}
        for n in longer:
            overrides = _rope_scaling_arguments(scaling, n, length)
            rebuilt = _rebuilt(config, task, arguments, model, overrides)
            scaled[scaling][str(n)] = scorer.score(rebuilt, [n])[0][str(n)]
    if scaled:
        fields["rope_scaled_accuracy"] = scaled
    return fields


def leak_check(accuracy, chance, num_examples):
    """`{"threshold": {length: t}, "above_threshold": [lengths]}`."""
    threshold = {n: leak_threshold(chance[n], num_examples) for n in accuracy}
    return {
        "sigmas": LEAK_SIGMAS,
        "threshold": threshold,
        "above_threshold": [n for n in accuracy if accuracy[n] > threshold[n]],
    }


def run_probe(config, text, fingerprint, task, variant, seed):
    """Trains and scores one probe model; returns its record.

    Args:
        config: the `ProbeConfig`.
        text: the `ProbeText`.
        fingerprint: its data fingerprint (recorded).
        task: one of `probe_tasks.TASKS`.
        variant: a key of `VARIANTS`.
        seed: int.
    """
    import keras

    start, cpu = time.time(), _cpu_seconds()
    train = probe_tasks.make_examples(
        task,
        text,
        config.seq_length,
        config.num_train_steps * config.batch_size,
        seed,
        "train",
        **config.task_options(task),
    )
    dims = {"vocabulary_size": text.vocabulary_size, **config.dims()}
    model, shared = probe_model.shared_start(
        task, seed, dims, VARIANTS[variant], config.copy_pool_size
    )
    train_loss = probe_model.train_probe(
        model,
        train,
        config.batch_size,
        config.optimizer,
        config.jit_compile,
    )
    scorer = _Scorer(config, text, task, seed)
    length_free = is_length_free(variant)
    scored = [
        n for n in config.eval_lengths if length_free or n <= config.seq_length
    ]
    accuracy, rows_right = scorer.score(model, scored)
    record = {
        "task": task,
        "variant": variant,
        "seed": seed,
        "options": VARIANTS[variant],
        "study": config.name,
        "train_length": config.seq_length,
        "chance": scorer.chance(),
        "accuracy": accuracy,
        "not_applicable": {
            str(n): not_applicable_reason(variant, config.seq_length)
            for n in config.eval_lengths
            if str(n) not in accuracy
        },
        "eval_examples": config.eval_examples,
        "train": {**config.study_settings(), "mean_train_loss": train_loss},
        "shared_initial_weights": len(shared),
        "data_fingerprint": fingerprint,
        "tupe_tf_version": __version__,
    }
    if task == "passkey":
        record["key_accuracy"] = rows_right
    record.update(
        _longer_scores(
            config, task, variant, {**dims, **VARIANTS[variant]}, model, scorer
        )
    )
    if variant in POSITION_BLIND:
        record["leak_check"] = leak_check(
            accuracy, record["chance"], config.eval_examples
        )
    keras.backend.clear_session()
    record["wall_seconds"] = time.time() - start
    record["cpu_seconds"] = _cpu_seconds() - cpu
    return record


def planned_runs(config):
    """`[(task, variant, seed)]` in the order they run."""
    return [
        (task, variant, seed)
        for seed in config.seeds
        for task in config.tasks
        for variant in config.variants
    ]


def check_study(config, fingerprint):
    """Writes `study.json` (settings and data), or refuses a study whose
    records were made with other settings or data."""
    path = os.path.join(config.study_results_dir, "study.json")
    saved_as = json.loads(
        json.dumps(
            {
                "settings": config.study_settings(),
                "data_fingerprint": fingerprint,
            }
        )
    )
    if not os.path.isfile(path):
        study_records.write_json(path, saved_as)
        return
    saved = study_records.read_json(path)
    if saved != saved_as:
        changed = sorted(
            key
            for key in set(saved["settings"]) | set(saved_as["settings"])
            if saved["settings"].get(key) != saved_as["settings"].get(key)
        )
        if saved.get("data_fingerprint") != fingerprint:
            changed.append("the data (--work_dir, --heldout_fraction)")
        raise UserError(
            f"{path} was written with other settings ({changed}); its "
            "records cannot be mixed with these. Use another --results_dir "
            "or the saved values."
        )


def _report_line(record, path, config):
    lengths = ", ".join(
        f"{n}: {record['accuracy'][n]:.3f} (chance {record['chance'][n]:.3f})"
        for n in record["accuracy"]
    )
    return (
        f"[probe] {os.path.relpath(path, config.study_results_dir)}: "
        f"{lengths}; {record['wall_seconds']:.0f} s"
    )


def run_probes(config):
    """Runs the missing runs of `config`; returns a summary dict.

    Returns:
        `{"new_runs", "finished_runs", "planned_runs", "wall_seconds",
        "records"}` (`records`: every finished run's record).
    """
    config.validate()
    fileio.make_writable_directory(config.work_dir, "--work_dir")
    fileio.make_writable_directory(config.results_dir, "--results_dir")
    text, fingerprint = prepare_probe_text(
        config.work_dir, config.heldout_fraction
    )
    check_study(config, fingerprint)
    start, new_runs = time.time(), 0
    for task, variant, seed in planned_runs(config):
        path = config.record_path(task, variant, seed)
        if os.path.isfile(path):
            continue
        if config.max_runs is not None and new_runs >= config.max_runs:
            break
        record = run_probe(config, text, fingerprint, task, variant, seed)
        study_records.write_json(path, record)
        new_runs += 1
        print(_report_line(record, path, config), flush=True)
        for n in record.get("leak_check", {}).get("above_threshold", []):
            print(
                f"[probe] LEAK CHECK: {variant} is above chance on {task} "
                f"at length {n}: the probe leaks position information.",
                flush=True,
            )
    records = load_records(config)
    return {
        "new_runs": new_runs,
        "finished_runs": len(records),
        "planned_runs": len(planned_runs(config)),
        "wall_seconds": time.time() - start,
        "records": records,
    }


def load_records(config):
    """The finished records of the planned runs."""
    return [
        study_records.read_json(path)
        for path in (config.record_path(*run) for run in planned_runs(config))
        if os.path.isfile(path)
    ]
