"""The comparison study: every position encoding, several seeds, resumable.

Each (variant, seed) pre-training and each fine-tuning run writes its own
small JSON file under `<results_dir>/<study name>/`; a rerun skips the runs
whose file exists, so the study can be stopped and extended run by run
(`seeds`, `other_seeds`, `glue_seeds`). Models live under `output_dir` and
are not needed to rebuild the tables and figures: `report` reads only the
JSON files (`scripts/compare.py --from_results`).

Variants come from the option table (`tupe_tf.backbone_options.
POSITION_ENCODINGS`) plus the ablations in `ABLATIONS`, so a new position
encoding joins the study without an edit here. The no-pre-training control
(same dims, random initialisation, same fine-tuning) is the GLUE row
`CONTROL`.

Example:

>>> config = CompareConfig(seeds=(0,), other_seeds=(0,), glue_seeds=(0,))
>>> [run.key for run in plan_runs(config)][:2]
['pretrain/bert__seed0', 'pretrain/bert-r__seed0']
"""

import dataclasses
import json
import os
import shutil
import time
from typing import Optional
from typing import Sequence

from data_pipeline import fileio
from tupe_tf.analysis import study_stats
from tupe_tf.backbone_options import POSITION_ENCODINGS

# Ablations of a table entry: name -> (base encoding, extra options).
ABLATIONS = {"tupe-a-tie-cls": ("tupe-a", {"untie_cls": False})}
# The GLUE row of a randomly initialised model (`CONTROL_ENCODING` layout).
CONTROL = "no-pretraining"
CONTROL_ENCODING = "bert"
# Variants that get every seed of `seeds` first (the core four).
CORE_VARIANTS = ("bert", "tupe-r", "diet-abs", "diet-rel")
REFERENCE = "bert"


def study_variants():
    """`{name: backbone options}`: every table entry, then its ablations."""
    variants = {
        name: {"position_encoding": name} for name in POSITION_ENCODINGS
    }
    for name, (base, extra) in ABLATIONS.items():
        if base in POSITION_ENCODINGS:
            variants[name] = {"position_encoding": base, **extra}
    return variants


VARIANTS = study_variants()


@dataclasses.dataclass
class CompareConfig:
    """What the study runs; every field is a flag of `scripts/compare.py`.

    Attributes:
        results_dir: per-run JSON files go to `<results_dir>/<name>/`.
        figures_dir: figures go to `<figures_dir>/<name>/`.
        output_dir: models and fine-tuning logs (not committed).
        work_dir: vocabulary and shards (`study_data`).
        variants: names from `VARIANTS` (default: all).
        seeds: pre-training seeds of `CORE_VARIANTS`.
        other_seeds: pre-training seeds of the other variants.
        model_size: a key of `tupe_tf.training.MODEL_SIZES`.
        model_dims: explicit dims overriding `model_size` (tests).
        seq_length: pre-training length.
        extrapolation_factors: held-out lengths as multiples of it.
        global_batch_size, num_train_steps, learning_rate, warmup_ratio:
            pre-training recipe.
        eval_interval: steps between validation points of the curve.
        eval_steps: validation batches per point.
        plateau_loss: validation loss of the plateau; the exit step is the
            first point `study_stats.PLATEAU_MARGIN` below it.
        glue_dir: GLUE TSV directory; None: no fine-tuning.
        glue_tasks: GLUE tasks.
        glue_learning_rates: learning rates tried per (variant, task); the
            one with the best median dev metric is reported.
        glue_seeds: fine-tuning seeds (of the seed-`seeds[0]` models).
        glue_epochs, glue_seq_length, glue_batch_size: the recipe.
        glue_max_train_examples: cap on training examples (None: all).
        heldout_fraction: fraction of the corpus held out (by document).
        train_files, eval_files, vocab_file: use these shards instead
            (tests); `eval_files` maps length -> files.
    """

    results_dir: str = "docs/results"
    figures_dir: str = "docs/figures/compare"
    output_dir: str = "runs/study"
    work_dir: str = "runs/study_data"
    variants: Sequence[str] = tuple(VARIANTS)
    seeds: Sequence[int] = (0, 1, 2)
    other_seeds: Sequence[int] = (0,)
    model_size: str = "tiny"
    model_dims: Optional[dict] = None
    seq_length: int = 64
    extrapolation_factors: Sequence[int] = (2, 4)
    global_batch_size: int = 32
    num_train_steps: int = 2000
    learning_rate: float = 1e-3
    warmup_ratio: float = 0.05
    eval_interval: int = 100
    eval_steps: int = 20
    plateau_loss: float = 5.7
    glue_dir: Optional[str] = None
    glue_tasks: Sequence[str] = ("cola", "sst2")
    glue_learning_rates: Sequence[float] = (1e-3,)
    glue_seeds: Sequence[int] = (0, 1, 2)
    glue_epochs: int = 3
    glue_seq_length: int = 64
    glue_batch_size: int = 32
    glue_max_train_examples: Optional[int] = None
    heldout_fraction: float = 0.08
    train_files: Sequence[str] = ()
    eval_files: Optional[dict] = None
    vocab_file: Optional[str] = None

    @property
    def name(self):
        """Directory name of the study: the settings a run depends on."""
        return f"{self.model_size}_len{self.seq_length}_steps{self.num_train_steps}"

    @property
    def eval_lengths(self):
        return [self.seq_length] + [
            self.seq_length * f for f in self.extrapolation_factors
        ]

    def study_settings(self):
        """Settings every run of the study must share (see `study.json`)."""
        return {
            "model_size": self.model_size,
            "model_dims": self.model_dims,
            "seq_length": self.seq_length,
            "eval_lengths": self.eval_lengths,
            "global_batch_size": self.global_batch_size,
            "num_train_steps": self.num_train_steps,
            "learning_rate": self.learning_rate,
            "warmup_ratio": self.warmup_ratio,
            "eval_interval": self.eval_interval,
            "eval_steps": self.eval_steps,
            "heldout_fraction": self.heldout_fraction,
        }

    def glue_recipe(self):
        """The fine-tuning settings a fine-tuning result depends on."""
        return {
            "epochs": self.glue_epochs,
            "seq_length": self.glue_seq_length,
            "batch_size": self.glue_batch_size,
            "max_train_examples": self.glue_max_train_examples,
        }


def validate_compare_config(config):
    """Raises `ValueError` naming the flag of a bad setting."""
    unknown = [name for name in config.variants if name not in VARIANTS]
    if unknown:
        raise ValueError(
            f"--variants has unknown names {unknown}; valid: {list(VARIANTS)}"
        )
    if not config.seeds:
        raise ValueError("--seeds must not be empty.")
    if not 1 <= config.eval_interval <= config.num_train_steps:
        raise ValueError(
            "--eval_interval must be between 1 and --num_train_steps "
            f"(got {config.eval_interval} and {config.num_train_steps})."
        )
    if any(int(f) < 2 for f in config.extrapolation_factors):
        raise ValueError(
            "--extrapolation_factors must be integers >= 2 "
            f"(got {list(config.extrapolation_factors)})."
        )
    if config.glue_dir is not None and not os.path.isdir(config.glue_dir):
        raise ValueError(f"--glue_dir {config.glue_dir!r} is not a directory.")
    if config.glue_dir is not None and not config.glue_learning_rates:
        raise ValueError("--glue_learning_rates must not be empty.")


@dataclasses.dataclass(frozen=True)
class Run:
    """One unit of the study: a pre-training or a fine-tuning run."""

    kind: str  # "pretrain" or "finetune"
    variant: str
    seed: int
    task: Optional[str] = None
    learning_rate: Optional[float] = None
    pretrain_seed: Optional[int] = None
    epochs: Optional[int] = None

    @property
    def key(self):
        if self.kind == "pretrain":
            return f"pretrain/{self.variant}__seed{self.seed}"
        return (
            f"finetune/{self.variant}__pseed{self.pretrain_seed}__"
            f"{self.task}__lr{self.learning_rate:g}__ep{self.epochs}__"
            f"seed{self.seed}"
        )


def _seeds_of(config, variant):
    return list(
        config.seeds if variant in CORE_VARIANTS else config.other_seeds
    )


def plan_runs(config):
    """Every run of the study, the most informative first.

    Order: seed 0 of every variant; fine-tuning seed 0 of the control and
    of every seed-0 model; the other seeds of the core variants; the other
    fine-tuning seeds; the other seeds of the remaining variants.
    """
    variants = list(config.variants)
    first = config.seeds[0]
    pretrain = {
        v: [s for s in _seeds_of(config, v)] or [first] for v in variants
    }
    runs = []

    def add_pretrain(variant, seeds):
        runs.extend(Run("pretrain", variant, s) for s in seeds)

    def add_finetune(glue_seeds):
        if config.glue_dir is None:
            return
        for variant in [CONTROL] + variants:
            for seed in glue_seeds:
                for task in config.glue_tasks:
                    for lr in config.glue_learning_rates:
                        runs.append(
                            Run(
                                "finetune",
                                variant,
                                seed,
                                task,
                                float(lr),
                                first,
                                config.glue_epochs,
                            )
                        )

    for v in variants:
        add_pretrain(v, [first])
    add_finetune(list(config.glue_seeds)[:1])
    for v in variants:
        if v in CORE_VARIANTS:
            add_pretrain(v, [s for s in pretrain[v] if s != first])
    add_finetune(list(config.glue_seeds)[1:])
    for v in variants:
        if v not in CORE_VARIANTS:
            add_pretrain(v, [s for s in pretrain[v] if s != first])
    seen, ordered = set(), []
    for run in runs:
        if run.key not in seen:
            seen.add(run.key)
            ordered.append(run)
    return ordered


def study_dir(config):
    return os.path.join(config.results_dir, config.name)


def result_path(config, run):
    return os.path.join(study_dir(config), run.key + ".json")


def _write_json(path, obj):
    _write_text(path, json.dumps(obj, indent=1, sort_keys=True) + "\n")


def _write_text(path, text):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fileio.write_text_atomically(path, text)


def check_study_settings(config):
    """Writes `study.json`, or refuses settings that differ from it."""
    path = os.path.join(study_dir(config), "study.json")
    settings = json.loads(json.dumps(config.study_settings()))
    if os.path.isfile(path):
        with open(path) as f:
            saved = json.load(f)
        if saved != settings:
            changed = sorted(
                k
                for k in set(saved) | set(settings)
                if saved.get(k) != settings.get(k)
            )
            raise ValueError(
                f"{path} was written with other settings ({changed}); its "
                "runs cannot be mixed with these. Use another --results_dir "
                "or the saved values."
            )
    else:
        _write_json(path, settings)


def _model_dir(config, variant, seed):
    return os.path.join(
        config.output_dir, config.name, "models", f"{variant}__seed{seed}"
    )


def _data(config):
    from tupe_tf.analysis import study_data

    if config.train_files:
        return study_data.StudyData(
            vocab_file=config.vocab_file,
            train_files=list(config.train_files),
            eval_files={int(k): list(v) for k, v in config.eval_files.items()},
            unigram_loss=float("nan"),
            stats={},
        )
    return study_data.prepare_study_data(
        config.work_dir,
        config.seq_length,
        config.eval_lengths,
        heldout_fraction=config.heldout_fraction,
    )


def _pretrain(config, run, data, steps=None, learning_rate=None):
    """Pre-trains one model from scratch; returns (model_dir, results)."""
    from tupe_tf import training

    if run.variant == CONTROL:
        options = {"position_encoding": CONTROL_ENCODING}
    else:
        options = VARIANTS[run.variant]
    model_dir = _model_dir(config, run.variant, run.seed)
    # An interrupted run starts over: its curve must be one run's history.
    shutil.rmtree(model_dir, ignore_errors=True)
    steps = config.num_train_steps if steps is None else steps
    interval = min(config.eval_interval, steps)
    result = training.run_pretraining(
        training.PretrainConfig(
            model_dir=model_dir,
            train_files=data.train_files,
            eval_files=data.eval_files[config.seq_length],
            vocab_file=data.vocab_file,
            seq_length=config.seq_length,
            global_batch_size=config.global_batch_size,
            num_train_steps=steps,
            save_every=interval,
            eval_every=interval,
            eval_steps=config.eval_steps,
            keep_checkpoints=1,
            seed=run.seed,
            verbose=0,
            model=training.ModelConfig(
                model_size=config.model_size,
                max_sequence_length=max(config.eval_lengths),
                **(config.model_dims or {}),
                **options,
            ),
            optimizer=training.OptimizerConfig(
                learning_rate=(
                    config.learning_rate
                    if learning_rate is None
                    else learning_rate
                ),
                warmup_ratio=config.warmup_ratio,
            ),
        )
    )
    return model_dir, result.results


def run_pretrain(config, run, data):
    """Pre-trains one (variant, seed); returns its result dict."""
    from tupe_tf.analysis import study_data

    start = time.time()
    model_dir, results = _pretrain(config, run, data)
    losses = [float(v) for v in results["history_this_run"].get("val_loss", [])]
    steps = [config.eval_interval * (i + 1) for i in range(len(losses))]
    preset = os.path.join(model_dir, "preset")
    extrapolation = {}
    for length in config.eval_lengths:
        extrapolation[str(length)] = study_data.evaluate_mlm(
            preset, data.eval_files[length], data.vocab_file, length
        )["loss"]
    return {
        "kind": "pretrain",
        "variant": run.variant,
        "options": VARIANTS[run.variant],
        "seed": run.seed,
        "num_train_steps": config.num_train_steps,
        "seq_length": config.seq_length,
        "learning_rate": config.learning_rate,
        "curve": {"steps": steps, "val_loss": losses},
        "final_val_loss": losses[-1] if losses else None,
        "heldout_loss_by_length": extrapolation,
        "unigram_loss": data.unigram_loss,
        "wall_seconds": time.time() - start,
    }


def _control_preset(config, data):
    """A randomly initialised preset (one step at learning rate 0)."""
    run = Run("pretrain", CONTROL, config.seeds[0])
    model_dir = _model_dir(config, CONTROL, run.seed)
    preset = os.path.join(model_dir, "preset")
    if not os.path.isfile(os.path.join(preset, "config.json")):
        _pretrain(config, run, data, steps=1, learning_rate=0.0)
    return preset


def run_finetune(config, run, data):
    """Fine-tunes one (variant, task, learning rate, seed)."""
    from tupe_tf import training
    from tupe_tf.training import finetune

    start = time.time()
    if run.variant == CONTROL:
        preset = _control_preset(config, data)
    else:
        preset = os.path.join(
            _model_dir(config, run.variant, run.pretrain_seed), "preset"
        )
        if not os.path.isfile(os.path.join(preset, "config.json")):
            raise FileNotFoundError(
                f"{preset} is missing: the pre-training of {run.variant} "
                f"seed {run.pretrain_seed} must run (or be re-run) first."
            )
    results = finetune.run_glue(
        training.GlueConfig(
            task=run.task,
            preset=preset,
            output_dir=os.path.join(
                config.output_dir,
                config.name,
                "glue",
                os.path.basename(result_path(config, run))[: -len(".json")],
            ),
            glue_dir=config.glue_dir,
            seq_length=config.glue_seq_length,
            learning_rates=[run.learning_rate],
            seeds=[run.seed],
            batch_size=config.glue_batch_size,
            num_epochs=config.glue_epochs,
            max_train_examples=config.glue_max_train_examples,
            verbose=0,
        )
    )
    primary = results["primary_metric"]
    single = results["runs"][0]
    split = next(iter(single["dev"]))
    return {
        "kind": "finetune",
        "variant": run.variant,
        "pretrain_seed": run.pretrain_seed,
        "num_train_steps": (
            0 if run.variant == CONTROL else config.num_train_steps
        ),
        "task": run.task,
        "learning_rate": run.learning_rate,
        "seed": run.seed,
        "metric": primary,
        "score": float(single["dev"][split][primary]),
        "score_per_epoch": [
            float(epoch[split][primary]) for epoch in single["dev_per_epoch"]
        ],
        "num_train_examples": results["num_train_examples"],
        "recipe": config.glue_recipe(),
        "wall_seconds": time.time() - start,
    }


def run_comparison(config: CompareConfig, max_runs=None):
    """Runs the missing runs of the study in `plan_runs` order, then reports.

    Args:
        config: a `CompareConfig`.
        max_runs: stop after this many new runs (None: all).

    Returns:
        The `report` dict.
    """
    validate_compare_config(config)
    check_study_settings(config)
    planned = plan_runs(config)
    todo = [r for r in planned if not os.path.isfile(result_path(config, r))]
    print(
        f"[compare] {config.name}: {len(planned) - len(todo)} of "
        f"{len(planned)} runs done, {len(todo)} to run",
        flush=True,
    )
    data = _data(config) if todo else None
    for index, run in enumerate(todo[:max_runs]):
        print(f"[compare] ({index + 1}/{len(todo)}) {run.key}", flush=True)
        if run.kind == "pretrain":
            result = run_pretrain(config, run, data)
            if run.seed == config.seeds[0]:
                try:
                    draw_bias_map(config, run)
                except Exception as error:  # a picture never stops a study
                    print(f"[compare] no bias map of {run.key}: {error!r}")
        else:
            result = run_finetune(config, run, data)
        _write_json(result_path(config, run), result)
        print(
            f"[compare] {run.key} done in {result['wall_seconds']:.0f} s",
            flush=True,
        )
        report(config)
    return report(config)


def draw_bias_map(config, run):
    """Positional-bias heat map of a trained model (needs the model)."""
    import numpy as np

    from tupe_tf.analysis import figures
    from tupe_tf.models.tupe_backbone import TupeBackbone

    preset = os.path.join(_model_dir(config, run.variant, run.seed), "preset")
    backbone = TupeBackbone.from_preset(preset)
    if not np.any(backbone.positional_bias(config.seq_length)):
        return None  # positions only at the input: no bias to draw
    return figures.plot_positional_bias(
        backbone,
        config.seq_length,
        os.path.join(
            config.figures_dir, config.name, f"bias_{run.variant}.png"
        ),
    )


def load_results(config):
    """`(pretrain, finetune)` lists of the study's finished-run dicts."""
    pretrain, finetune = [], []
    for kind, bucket in (("pretrain", pretrain), ("finetune", finetune)):
        directory = os.path.join(study_dir(config), kind)
        if not os.path.isdir(directory):
            continue
        for name in sorted(os.listdir(directory)):
            if name.endswith(".json"):
                with open(os.path.join(directory, name)) as f:
                    bucket.append(json.load(f))
    return pretrain, finetune


def report(config):
    """Tables and figures from the per-run JSON files only.

    Writes `<results_dir>/<name>/tables.md` and the figures under
    `<figures_dir>/<name>/`; returns a dict with `tables` (the markdown),
    `figures` and `total_wall_seconds`.
    """
    from tupe_tf.analysis import study_figures

    pretrain, finetune = load_results(config)
    order = [v for v in config.variants if v in VARIANTS]
    planned = plan_runs(config)
    done = {r.key for r in planned if os.path.isfile(result_path(config, r))}
    tables = render_tables(config, pretrain, finetune, order)
    total = sum(r["wall_seconds"] for r in pretrain + finetune)
    tables += (
        f"\nRuns finished: {len(done)} of {len(planned)} planned; their "
        f"total wall time: {total / 60:.1f} min.\n"
    )
    pending = [r.key for r in planned if r.key not in done]
    if pending:
        tables += "Pending: " + ", ".join(f"`{k}`" for k in pending) + ".\n"
    _write_text(os.path.join(study_dir(config), "tables.md"), tables)
    figure_dir = os.path.join(config.figures_dir, config.name)
    written = []
    if pretrain:
        written.append(
            study_figures.plot_loss_bands(
                pretrain,
                order,
                config.plateau_loss,
                os.path.join(figure_dir, "val_mlm_loss.png"),
            )
        )
        written.append(
            study_figures.plot_extrapolation(
                pretrain,
                order,
                config.seq_length,
                os.path.join(figure_dir, "extrapolation.png"),
            )
        )
    if finetune:
        written.append(
            study_figures.plot_glue(
                glue_summary(config, finetune, order),
                os.path.join(figure_dir, "glue.png"),
            )
        )
    return {
        "tables": tables,
        "figures": written,
        "total_wall_seconds": total,
        "done": sorted(done),
        "pending": pending,
    }


def _by_variant(runs, order):
    grouped = {v: [] for v in order}
    for run in runs:
        if run["variant"] in grouped:
            grouped[run["variant"]].append(run)
    return grouped


def pretrain_summary(config, pretrain, order):
    """Per variant: spreads over seeds of the study's figures."""
    grouped = _by_variant(pretrain, order)
    reference = grouped.get(REFERENCE, [])
    bert_final = study_stats.spread([r["final_val_loss"] for r in reference])[
        "median"
    ]
    summary = {}
    for variant, runs in grouped.items():
        if not runs:
            continue
        curves = [r["curve"] for r in runs]
        summary[variant] = {
            "seeds": sorted(r["seed"] for r in runs),
            "final": study_stats.spread([r["final_val_loss"] for r in runs]),
            "reach_bert": study_stats.step_spread(
                [
                    study_stats.first_step_at_or_below(
                        c["steps"], c["val_loss"], bert_final
                    )
                    for c in curves
                ],
                config.num_train_steps,
            ),
            "plateau_exit": study_stats.step_spread(
                [
                    study_stats.plateau_exit_step(
                        c["steps"], c["val_loss"], config.plateau_loss
                    )
                    for c in curves
                ],
                config.num_train_steps,
            ),
            "by_length": {
                length: study_stats.spread(
                    [r["heldout_loss_by_length"].get(str(length)) for r in runs]
                )
                for length in config.eval_lengths
            },
        }
    return summary


def glue_summary(config, finetune, order):
    """`{task: {variant: {...}}}` with the selected learning rate's spread.

    Selection rule: per (variant, task), the learning rate with the highest
    median dev metric over fine-tuning seeds (ties: the smaller rate).
    """
    recipe = config.glue_recipe()
    summary = {}
    for task in config.glue_tasks:
        rows = {}
        for variant in [CONTROL] + order:
            runs = [
                r
                for r in finetune
                if r["variant"] == variant
                and r["task"] == task
                and r["recipe"] == recipe
                and r["learning_rate"] in config.glue_learning_rates
                and r["seed"] in config.glue_seeds
            ]
            if not runs:
                continue
            by_lr = {}
            for r in runs:
                by_lr.setdefault(r["learning_rate"], []).append(r["score"])
            spreads = {lr: study_stats.spread(v) for lr, v in by_lr.items()}
            best = max(sorted(spreads), key=lambda lr: spreads[lr]["median"])
            rows[variant] = {
                "metric": runs[0]["metric"],
                "learning_rate": best,
                "score": spreads[best],
            }
        if rows:
            summary[task] = rows
    return summary


def render_tables(config, pretrain, finetune, order):
    """The study's markdown tables (deterministic given the JSON files)."""
    lines = []
    summary = pretrain_summary(config, pretrain, order)
    ref = summary.get(REFERENCE)
    lines.append(
        "Pre-training: median [min, max] over seeds; `vs bert`: "
        '"no difference" where the min-max intervals overlap.\n'
    )
    header = [
        "variant",
        "seeds",
        "final val MLM loss",
        "vs bert",
        "steps to bert's final loss",
        f"plateau exit (loss < {config.plateau_loss - study_stats.PLATEAU_MARGIN:g})",
    ]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + " --- |" * len(header))
    for variant, s in summary.items():
        versus = (
            "reference"
            if variant == REFERENCE
            else (
                study_stats.compare_to(s["final"], ref["final"], True)
                if ref
                else "n/a"
            )
        )
        lines.append(
            "| "
            + " | ".join(
                [
                    variant,
                    ",".join(str(x) for x in s["seeds"]),
                    study_stats.format_spread(s["final"]),
                    versus,
                    s["reach_bert"]["text"],
                    s["plateau_exit"]["text"],
                ]
            )
            + " |"
        )
    lines.append("")
    lines.append(
        "Held-out MLM loss by sequence length (one full pass over the "
        "held-out documents; trained at "
        f"{config.seq_length}):\n"
    )
    header = ["variant"] + [
        f"length {n}" + (" (trained)" if n == config.seq_length else "")
        for n in config.eval_lengths
    ]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + " --- |" * len(header))
    for variant, s in summary.items():
        lines.append(
            "| "
            + " | ".join(
                [variant]
                + [
                    study_stats.format_spread(s["by_length"][n])
                    for n in config.eval_lengths
                ]
            )
            + " |"
        )
    glue = glue_summary(config, finetune, order)
    for task, rows in glue.items():
        control = rows.get(CONTROL)
        metric = next(iter(rows.values()))["metric"]
        lines.append("")
        lines.append(
            f"{task} dev {metric}: median [min, max] over fine-tuning seeds "
            "at the selected learning rate; `vs control`: against the "
            "no-pre-training control.\n"
        )
        header = ["variant", "learning rate", metric, "vs control"]
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + " --- |" * len(header))
        for variant, row in rows.items():
            versus = (
                "control"
                if variant == CONTROL
                else (
                    study_stats.compare_to(
                        row["score"], control["score"], False
                    )
                    if control
                    else "n/a"
                )
            )
            lines.append(
                "| "
                + " | ".join(
                    [
                        variant,
                        f"{row['learning_rate']:g}",
                        study_stats.format_spread(row["score"]),
                        versus,
                    ]
                )
                + " |"
            )
    return "\n".join(lines) + "\n"
