"""Running the comparison study: pre-training and fine-tuning runs.

`run_comparison` runs what is missing of the study, one run at a time; each
finished run writes its JSON file (`study_records`) and the tables and
figures are rebuilt after it (`study_report`), so a stopped study can be
resumed, or extended by a rerun with more seeds.

Example:

>>> from tupe_tf.analysis.study_config import CompareConfig
>>> result = run_comparison(CompareConfig(max_runs=1))  # doctest: +SKIP
"""

import os
import resource
import shutil
import time

from tupe_tf import training
from tupe_tf.analysis import figures
from tupe_tf.analysis import study_beyond_table
from tupe_tf.analysis import study_data
from tupe_tf.analysis import study_extension
from tupe_tf.analysis import study_plan
from tupe_tf.analysis import study_records
from tupe_tf.analysis import study_report
from tupe_tf.analysis.study_config import CONTROL
from tupe_tf.analysis.study_config import CONTROL_ENCODING
from tupe_tf.analysis.study_config import VARIANTS
from tupe_tf.analysis.study_config import CompareConfig
from tupe_tf.analysis.study_plan import Run
from tupe_tf.models.tupe_backbone import TupeBackbone
from tupe_tf.training import finetune
from tupe_tf.utils import fileio
from tupe_tf.utils.errors import UserError
from tupe_tf.version import __version__


def _data(config):
    pretrain = config.pretrain
    if pretrain.train_files:
        eval_files = {int(k): list(v) for k, v in config.eval_files.items()}
        return study_data.StudyData(
            vocab_file=pretrain.vocab_file,
            train_files=list(pretrain.train_files),
            eval_files=eval_files,
            unigram_loss=float("nan"),
            stats={},
            fingerprint=study_data.data_fingerprint(
                pretrain.vocab_file, pretrain.train_files, eval_files
            ),
        )
    fileio.make_writable_directory(pretrain.work_dir, "--work_dir")
    return study_data.prepare_study_data(
        pretrain.work_dir,
        pretrain.seq_length,
        config.eval_lengths,
        heldout_fraction=config.heldout_fraction,
    )


def _beyond_table_data(config, data):
    """The held-out shards past the tables, from --eval_files or built."""
    lengths = config.beyond_table_lengths
    if config.pretrain.train_files:
        absent = [n for n in lengths if n not in data.eval_files]
        if absent:
            raise UserError(
                f"--eval_files has no shards of length {absent} "
                "(--beyond_table_factors): add them or set the factors."
            )
        files = {n: data.eval_files[n] for n in lengths}
    else:
        files = study_data.prepare_beyond_table_data(
            config.pretrain.work_dir, data.vocab_file, lengths
        )
    return study_beyond_table.BeyondTableData(
        vocab_file=data.vocab_file,
        files={**data.eval_files, **files},
        fingerprint=study_data.data_fingerprint(data.vocab_file, [], files),
    )


def _pretrain(config, run, data, steps=None, warmup_steps=None):
    """Pre-trains one model from scratch; returns (model_dir, results)."""
    if run.variant == CONTROL:
        options = {"position_encoding": CONTROL_ENCODING}
    else:
        options = VARIANTS[run.variant]
    model_dir = study_plan.model_dir(config, run.variant, run.seed)
    # An interrupted run starts over: its curve must be one run's history.
    shutil.rmtree(model_dir, ignore_errors=True)
    pretrain = config.pretrain
    steps = pretrain.num_train_steps if steps is None else steps
    interval = min(config.eval_interval, steps)
    result = training.run_pretraining(
        pretrain.replace(
            model_dir=model_dir,
            train_files=data.train_files,
            eval_files=data.eval_files[pretrain.seq_length],
            vocab_file=data.vocab_file,
            num_train_steps=steps,
            save_every=interval,
            eval_every=interval,
            seed=run.seed,
            model=dict(max_sequence_length=max(config.eval_lengths), **options),
            optimizer=dict(warmup_steps=warmup_steps),
        )
    )
    return model_dir, result.results


def run_pretrain(config, run, data, beyond_table_data):
    """Pre-trains one (variant, seed); returns its result dict."""
    start = time.time()
    model_dir, results = _pretrain(config, run, data)
    curve = study_records.validation_curve(results, config.eval_interval)
    losses = curve["val_loss"]
    model = study_data.load_masked_lm(os.path.join(model_dir, "preset"))
    losses_by_length = study_data.heldout_losses(
        model, data.eval_files, data.vocab_file, config.eval_lengths
    )
    extrapolation = {
        str(length): result["loss"]
        for length, result in losses_by_length.items()
    }
    record = {
        "kind": "pretrain",
        "variant": run.variant,
        "options": VARIANTS[run.variant],
        "seed": run.seed,
        "num_train_steps": config.pretrain.num_train_steps,
        "seq_length": config.pretrain.seq_length,
        "learning_rate": config.pretrain.optimizer.learning_rate,
        "curve": curve,
        "final_val_loss": losses[-1] if losses else None,
        "heldout_loss_by_length": extrapolation,
        "unigram_loss": data.unigram_loss,
        "data_fingerprint": data.fingerprint,
    }
    fields = study_beyond_table.evaluate(
        config, run.variant, model, beyond_table_data
    )
    record = study_beyond_table.add_to_record(record, fields)
    record["wall_seconds"] = time.time() - start
    return record


def _control_preset(config, data):
    """A randomly initialised preset: one step that is the first of a
    one-step warm-up, whose learning rate is exactly 0, so the weights stay
    the initial ones."""
    run = Run("pretrain", CONTROL, config.seeds[0])
    if not study_plan.has_preset(config, CONTROL, run.seed):
        _pretrain(config, run, data, steps=1, warmup_steps=1)
    return study_plan.preset_dir(config, CONTROL, run.seed)


def run_finetune(config, run, data):
    """Fine-tunes one (variant, task, learning rate, seed)."""
    start = time.time()
    if run.variant == CONTROL:
        preset = _control_preset(config, data)
    else:
        preset = study_plan.preset_dir(config, run.variant, run.pretrain_seed)
        if not study_plan.has_preset(config, run.variant, run.pretrain_seed):
            raise UserError(
                f"{preset} is missing: the pre-training of {run.variant} "
                f"seed {run.pretrain_seed} must run (or be re-run) first."
            )
    results = finetune.run_glue(
        config.finetune.replace(
            task=run.task,
            preset=preset,
            output_dir=study_plan.finetune_output_dir(config, run),
            learning_rates=[run.learning_rate],
            seeds=[run.seed],
            runtime=config.pretrain.runtime,
        )
    )
    primary = results["primary_metric"]
    # One rate: it is the chosen one, its evaluation scored once.
    single = results["runs"][0]
    split = next(iter(single["evaluation"]))
    return {
        "kind": "finetune",
        "variant": run.variant,
        "pretrain_seed": run.pretrain_seed,
        "num_train_steps": (
            0 if run.variant == CONTROL else config.pretrain.num_train_steps
        ),
        "task": run.task,
        "learning_rate": run.learning_rate,
        "seed": run.seed,
        "metric": primary,
        # The evaluation file after the last epoch.
        "score": float(single["evaluation"][split][primary]),
        # What a choice between rates reads (study_summary).
        "selection_score": float(single["selection"][primary]),
        "selection_score_per_epoch": [
            float(epoch[primary]) for epoch in single["selection_per_epoch"]
        ],
        "selection_fraction": config.finetune.selection_fraction,
        "num_train_examples": results["num_train_examples"],
        "num_fit_examples": results["selection_split"]["num_fit_examples"],
        "recipe": config.glue_recipe(),
        "data_fingerprint": data.fingerprint,
        "wall_seconds": time.time() - start,
    }


def _cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _execute(config, run, data, beyond_table_data, path=None):
    """Runs one run, writes its JSON file (to `path`, default its result
    path) and the report; returns the dict."""
    cpu = _cpu_seconds()
    if run.kind == study_extension.KIND:
        result = study_extension.run_extension(
            config, run, data, study_extension.extension_files(config, data)
        )
    elif run.kind == "pretrain":
        result = run_pretrain(config, run, data, beyond_table_data)
        if run.seed == config.seeds[0] and path is None:
            try:
                draw_bias_map(config, run)
            except Exception as error:  # a picture never stops a study
                print(f"[compare] no bias map of {run.key}: {error!r}")
    else:
        result = run_finetune(config, run, data)
    # Process CPU time of all threads: with a busy machine, wall time
    # overstates the compute; CPU time over the cores bounds it.
    result["cpu_seconds"] = _cpu_seconds() - cpu
    # The code that made the record: a record of another version describes
    # that version's options (docs/spec.md names what changed).
    result["tupe_tf_version"] = __version__
    path = path or study_plan.result_path(config, run)
    study_records.write_json(path, result)
    print(
        f"[compare] {os.path.relpath(path, config.study_results_dir)} done in {result['wall_seconds']:.0f} s "
        f"({result['cpu_seconds']:.0f} CPU s)",
        flush=True,
    )
    study_report.report(config)
    return result


def _incomplete(config, planned):
    """Finished pre-training runs that lack a beyond-table evaluation."""
    return [
        run
        for run in planned
        if run.kind == "pretrain"
        and os.path.isfile(study_plan.result_path(config, run))
        and study_beyond_table.missing(
            config,
            study_records.read_json(study_plan.result_path(config, run)),
        )
    ]


def _complete(config, runs, beyond_table_data):
    """Adds the beyond-table evaluations to finished runs from their models."""
    for run in runs:
        path = study_plan.result_path(config, run)
        model = study_data.load_masked_lm(
            study_plan.preset_dir(config, run.variant, run.seed)
        )
        fields = study_beyond_table.evaluate(
            config, run.variant, model, beyond_table_data
        )
        record = study_records.read_json(path)
        study_records.write_json(
            path, study_beyond_table.add_to_record(record, fields)
        )
        print(f"[compare] {run.key}: beyond-table lengths added", flush=True)
    if runs:
        study_report.report(config)


def run_comparison(config: CompareConfig):
    """Runs the missing runs of the study in `plan_runs` order, then reports.

    A fine-tuning or extension run whose pre-trained model is not on this
    machine (the study continues in a new checkout) first pre-trains that
    model again with the same seed; where the pre-training's record exists
    it is kept and the new one goes to `study_plan.rerun_path` (the report
    says how well the reruns reproduce their records). A finished pre-training
    run that lacks a beyond-table evaluation (`study_beyond_table`) gets
    it from its model, or is pre-trained again where the model is gone.

    Args:
        config: a `CompareConfig`; its `max_runs` stops the study after
            that many new runs.

    Returns:
        The `report` dict.
    """
    config.validate()
    for directory, flag in config.output_locations():
        fileio.make_writable_directory(directory, flag)
    study_records.check_study_settings(config)
    planned = study_plan.plan_runs(config)
    incomplete = _incomplete(config, planned)
    todo = [
        r
        for r in planned
        if not os.path.isfile(study_plan.result_path(config, r))
        or (
            r in incomplete
            and not study_plan.has_preset(config, r.variant, r.seed)
        )
    ]
    if any(run.kind == "finetune" for run in todo):
        study_records.check_glue_selection(config)
    print(
        f"[compare] {config.name}: {len(planned) - len(todo)} of "
        f"{len(planned)} runs done, {len(todo)} to run",
        flush=True,
    )
    data = beyond_table_data = None
    if todo or incomplete:
        data = _data(config)
        study_records.check_study_data(config, data)
        beyond_table_data = _beyond_table_data(config, data)
    _complete(
        config, [r for r in incomplete if r not in todo], beyond_table_data
    )
    for index, run in enumerate(todo[: config.max_runs]):
        print(f"[compare] ({index + 1}/{len(todo)}) {run.key}", flush=True)
        if (
            run.kind != "pretrain"
            and run.variant != CONTROL
            and not study_plan.has_preset(
                config, run.variant, run.pretrain_seed
            )
        ):
            again = Run("pretrain", run.variant, run.pretrain_seed)
            print(
                f"[compare] {again.key} again: its model is not on this "
                f"machine and {run.key} needs it",
                flush=True,
            )
            recorded = os.path.isfile(study_plan.result_path(config, again))
            _execute(
                config,
                again,
                data,
                beyond_table_data,
                study_plan.rerun_path(config, again) if recorded else None,
            )
        _execute(config, run, data, beyond_table_data)
    return study_report.report(config)


def draw_bias_map(config, run):
    """Positional-bias heat map of a trained model (needs the model)."""
    import numpy as np

    backbone = TupeBackbone.from_preset(
        study_plan.preset_dir(config, run.variant, run.seed)
    )
    length = config.pretrain.seq_length
    if not np.any(backbone.positional_bias(length)):
        return None  # positions only at the input: no bias to draw
    return figures.plot_positional_bias(
        backbone,
        length,
        os.path.join(config.study_figures_dir, f"bias_{run.variant}.png"),
        name=run.variant,
    )
