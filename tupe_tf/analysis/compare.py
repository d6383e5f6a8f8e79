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
['pretrain/bert__seed0', 'pretrain/tupe-r__seed0']
"""

import dataclasses
import json
import os
import resource
import shutil
import time
from typing import Optional
from typing import Sequence

from tupe_tf.analysis import study_stats
from tupe_tf.backbone_options import POSITION_ENCODINGS
from tupe_tf.training.config import SMALL_FINETUNE_RECIPE
from tupe_tf.training.config import SMALL_PRETRAIN_LEARNING_RATE
from tupe_tf.utils import fileio
from tupe_tf.utils.config_flags import setting
from tupe_tf.utils.keyword_arguments import refuses_unknown_fields

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


@refuses_unknown_fields
@dataclasses.dataclass
class CompareConfig:
    """What the study runs; every field with a help text is a flag of
    `scripts/compare.py`.

    Example:

    >>> CompareConfig(num_train_steps=500).name
    'tiny_len64_steps500'
    """

    results_dir: str = setting(
        "docs/results",
        help="Per-run JSON files go to <results_dir>/<study name>/.",
    )
    figures_dir: str = setting(
        "docs/figures/compare", help="Figures go to <figures_dir>/<name>/."
    )
    output_dir: str = setting(
        "runs/study", help="Models and fine-tuning logs (not committed)."
    )
    work_dir: str = setting(
        "runs/study_data", help="Vocabulary and shards of the study's split."
    )
    variants: Sequence[str] = setting(
        tuple(VARIANTS),
        help=f"Variants, from {list(VARIANTS)}.",
        element_type=str,
    )
    seeds: Sequence[int] = setting(
        (0, 1, 2),
        help=f"Pre-training seeds of {list(CORE_VARIANTS)}; the first "
        "seed's models are the ones fine-tuned (see --glue_pretrain_seeds).",
        element_type=int,
    )
    other_seeds: Sequence[int] = setting(
        (0,), help="Pre-training seeds of the other variants.", element_type=int
    )
    model_size: str = setting(
        "tiny", help="A key of tupe_tf.training.MODEL_SIZES."
    )
    model_dims: Optional[dict] = setting(
        None, help="Explicit dims overriding model_size (tests).", flag=False
    )
    seq_length: int = setting(64, help="Pre-training sequence length.")
    extrapolation_factors: Sequence[int] = setting(
        (2, 4),
        help="Held-out lengths as multiples of --seq_length.",
        element_type=int,
    )
    global_batch_size: int = setting(32, help="Pre-training batch.")
    # 2,000 is the fewest measured to take a variant off the plateau on the
    # study's data (tupe-r: 5.843 at 1,200 steps, 5.396 at 1,800;
    # batch 16 for 2,000 steps stayed at 5.854; docs/results.md).
    num_train_steps: int = setting(2000, help="Pre-training steps per run.")
    learning_rate: float = setting(
        SMALL_PRETRAIN_LEARNING_RATE, help="Pre-training peak rate."
    )
    warmup_ratio: float = setting(0.05, help="Pre-training warm-up fraction.")
    eval_interval: int = setting(
        100, help="Steps between validation-loss points of the curve."
    )
    eval_steps: int = setting(20, help="Validation batches per point.")
    plateau_loss: float = setting(
        5.7,
        help="Validation loss of the plateau; the exit step is the first "
        "point study_stats.PLATEAU_MARGIN below it (report only).",
    )
    glue_dir: Optional[str] = setting(
        None, help="GLUE TSV directory (CoLA/, SST-2/); unset: no fine-tuning."
    )
    glue_tasks: Sequence[str] = setting(
        ("cola", "sst2"), help="GLUE tasks.", element_type=str
    )
    glue_learning_rates: Sequence[float] = setting(
        SMALL_FINETUNE_RECIPE["learning_rates"],
        help="Fine-tuning learning rates tried per (variant, task); the one "
        "with the best median dev metric is reported.",
        element_type=float,
    )
    glue_seeds: Sequence[int] = setting(
        (0, 1, 2), help="Fine-tuning seeds.", element_type=int
    )
    glue_pretrain_seeds: Optional[Sequence[int]] = setting(
        None,
        help="Pre-training seeds whose models are fine-tuned (unset: the "
        "first of --seeds); a variant's runs at every listed seed it was "
        "pre-trained with are pooled in its GLUE row.",
        element_type=int,
    )
    glue_variants: Sequence[str] = setting(
        CORE_VARIANTS,
        help="Variants whose models (those of --glue_pretrain_seeds) are "
        "fine-tuned (the control always is); each added variant adds "
        "len(glue_pretrain_seeds) x len(glue_tasks) x len(glue_seeds) "
        "fine-tuning runs (51-79 s each on 2 CPU cores, 104-149 s on a slower VM; docs/results.md).",
        element_type=str,
    )
    jit_compile: bool = setting(
        True,
        help="XLA-compile the pre-training and fine-tuning steps (tiny, 2 "
        "CPU cores: pre-training 167-181 vs 210-227 ms per step, fine-tuning "
        "median 141 vs 205 ms, docs/benchmarks.md).",
    )
    glue_epochs: int = setting(
        SMALL_FINETUNE_RECIPE["num_epochs"], help="Fine-tuning epochs."
    )
    glue_seq_length: int = setting(64, help="Fine-tuning sequence length.")
    glue_batch_size: int = setting(32, help="Fine-tuning batch.")
    glue_max_train_examples: Optional[int] = setting(
        None, help="Cap on fine-tuning training examples (unset: all)."
    )
    heldout_fraction: float = setting(
        0.08, help="Fraction of the corpus held out, by document."
    )
    from_results: bool = setting(
        False,
        help="Only rebuild the tables and figures from the per-run JSON "
        "files (no training, no models needed).",
    )
    max_runs: Optional[int] = setting(
        None, help="Stop after this many new runs (unset: all)."
    )
    train_files: Sequence[str] = setting(
        (), help="Shards to use instead (tests).", flag=False
    )
    eval_files: Optional[dict] = setting(
        None, help="{length: files} to use instead (tests).", flag=False
    )
    vocab_file: Optional[str] = setting(
        None, help="Vocabulary to use instead (tests).", flag=False
    )

    @property
    def name(self):
        """Directory name of the study: the settings a run depends on."""
        return f"{self.model_size}_len{self.seq_length}_steps{self.num_train_steps}"

    @property
    def fine_tuned_pretrain_seeds(self):
        """`glue_pretrain_seeds`, or the first of `seeds` when unset."""
        if self.glue_pretrain_seeds is None:
            return [self.seeds[0]]
        return list(self.glue_pretrain_seeds)

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
            # Epochs are part of a fine-tuning run's name; the rest of the
            # recipe must be the same for every fine-tuning run.
            "glue_recipe": {
                k: v for k, v in self.glue_recipe().items() if k != "epochs"
            },
        }

    def glue_recipe(self):
        """The fine-tuning settings a fine-tuning result depends on."""
        return {
            "epochs": self.glue_epochs,
            "seq_length": self.glue_seq_length,
            "batch_size": self.glue_batch_size,
            "max_train_examples": self.glue_max_train_examples,
            "jit_compile": self.jit_compile,
        }

    def validate(self):
        """Raises `ValueError` naming the flag of a bad setting."""
        for flag, names in (
            ("--variants", self.variants),
            ("--glue_variants", self.glue_variants),
        ):
            unknown = [name for name in names if name not in VARIANTS]
            if unknown:
                raise ValueError(
                    f"{flag} has unknown names {unknown}; valid: "
                    f"{list(VARIANTS)}"
                )
        if not self.seeds:
            raise ValueError("--seeds must not be empty.")
        pretrained = set(self.seeds) | set(self.other_seeds)
        stray = [
            s for s in self.fine_tuned_pretrain_seeds if s not in pretrained
        ]
        if stray or not self.fine_tuned_pretrain_seeds:
            raise ValueError(
                f"--glue_pretrain_seeds {stray or '(empty)'}: every seed must "
                f"be one of --seeds or --other_seeds ({sorted(pretrained)})."
            )
        if not 1 <= self.eval_interval <= self.num_train_steps:
            raise ValueError(
                "--eval_interval must be between 1 and --num_train_steps "
                f"(got {self.eval_interval} and {self.num_train_steps})."
            )
        if any(int(f) < 2 for f in self.extrapolation_factors):
            raise ValueError(
                "--extrapolation_factors must be integers >= 2 "
                f"(got {list(self.extrapolation_factors)})."
            )
        if self.glue_dir is not None and not os.path.isdir(self.glue_dir):
            raise ValueError(
                f"--glue_dir {self.glue_dir!r} is not a directory."
            )
        if self.glue_dir is not None and not self.glue_learning_rates:
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
    """Every run of the study, in the order it runs.

    A study stopped part-way should already answer the main question, and
    models are not committed (a later session may run on another machine),
    so: first the control's fine-tuning; then per core variant its
    seed-`seeds[0]` pre-training followed at once by its fine-tuning; then
    the core variants' other seeds (each followed by its fine-tuning when
    it is one of `glue_pretrain_seeds`); then the remaining variants the
    same way.
    """
    variants = list(config.variants)
    first = config.seeds[0]

    def finetunings(variant, pretrain_seed):
        if config.glue_dir is None or (
            variant != CONTROL
            and (
                variant not in config.glue_variants
                or pretrain_seed not in config.fine_tuned_pretrain_seeds
            )
        ):
            return []
        return [
            Run(
                "finetune",
                variant,
                seed,
                task,
                float(lr),
                pretrain_seed,
                epochs,
            )
            for epochs in [config.glue_epochs]
            for seed in config.glue_seeds
            for task in config.glue_tasks
            for lr in config.glue_learning_rates
        ]

    # The control has no pre-training: one set of runs, named as seed `first`.
    runs = finetunings(CONTROL, first)
    for core in (True, False):
        group = [v for v in variants if (v in CORE_VARIANTS) == core]
        for variant in group:
            runs.append(Run("pretrain", variant, first))
            runs.extend(finetunings(variant, first))
        for variant in group:
            for seed in _seeds_of(config, variant):
                if seed != first:
                    runs.append(Run("pretrain", variant, seed))
                    runs.extend(finetunings(variant, seed))
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


def check_study_data(config, data):
    """Writes `data.json`, or refuses data that differ from its runs' data.

    The fingerprint covers the vocabulary and every shard, so a changed
    corpus, split or vocabulary learner is caught before any run mixes
    with runs trained on the old data.
    """
    path = os.path.join(study_dir(config), "data.json")
    record = {
        "fingerprint": data.fingerprint,
        "unigram_loss": data.unigram_loss,
        "stats": data.stats,
    }
    if os.path.isfile(path):
        with open(path) as f:
            saved = json.load(f)
        if saved["fingerprint"] != data.fingerprint:
            raise ValueError(
                f"The study's data changed: {path} records the data its "
                f"runs were trained on ({saved['fingerprint'][:12]}), the "
                f"data under --work_dir={config.work_dir} is "
                f"{data.fingerprint[:12]} (another corpus, split or "
                "vocabulary learner). Runs on different data cannot be "
                "mixed: move the study's results aside to start it again."
            )
    else:
        _write_json(path, record)


def _model_dir(config, variant, seed):
    return os.path.join(
        config.output_dir, config.name, "models", f"{variant}__seed{seed}"
    )


def _preset_dir(config, variant, seed):
    return os.path.join(_model_dir(config, variant, seed), "preset")


def _data(config):
    from tupe_tf.analysis import study_data

    if config.train_files:
        return study_data.StudyData(
            vocab_file=config.vocab_file,
            train_files=list(config.train_files),
            eval_files={int(k): list(v) for k, v in config.eval_files.items()},
            unigram_loss=float("nan"),
            stats={},
            fingerprint=study_data.data_fingerprint(
                config.vocab_file,
                config.train_files,
                {int(k): v for k, v in config.eval_files.items()},
            ),
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
            runtime=training.RuntimeConfig(jit_compile=config.jit_compile),
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
        "data_fingerprint": data.fingerprint,
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
        preset = _preset_dir(config, run.variant, run.pretrain_seed)
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
            runtime=training.RuntimeConfig(jit_compile=config.jit_compile),
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
        "data_fingerprint": data.fingerprint,
        "wall_seconds": time.time() - start,
    }


def _cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _execute(config, run, data):
    """Runs one run, writes its JSON file and the report; returns the dict."""
    cpu = _cpu_seconds()
    if run.kind == "pretrain":
        result = run_pretrain(config, run, data)
        if run.seed == config.seeds[0]:
            try:
                draw_bias_map(config, run)
            except Exception as error:  # a picture never stops a study
                print(f"[compare] no bias map of {run.key}: {error!r}")
    else:
        result = run_finetune(config, run, data)
    # Process CPU time of all threads: with a busy machine, wall time
    # overstates the compute; CPU time over the cores bounds it.
    result["cpu_seconds"] = _cpu_seconds() - cpu
    _write_json(result_path(config, run), result)
    print(
        f"[compare] {run.key} done in {result['wall_seconds']:.0f} s "
        f"({result['cpu_seconds']:.0f} CPU s)",
        flush=True,
    )
    report(config)
    return result


def run_comparison(config: CompareConfig, max_runs=None):
    """Runs the missing runs of the study in `plan_runs` order, then reports.

    A fine-tuning run whose pre-trained model is not on this machine (the
    study continues in a new checkout) first pre-trains that model again
    with the same seed, replacing its JSON file.

    Args:
        config: a `CompareConfig`.
        max_runs: stop after this many new runs (None: all).

    Returns:
        The `report` dict.
    """
    config.validate()
    check_study_settings(config)
    planned = plan_runs(config)
    todo = [r for r in planned if not os.path.isfile(result_path(config, r))]
    print(
        f"[compare] {config.name}: {len(planned) - len(todo)} of "
        f"{len(planned)} runs done, {len(todo)} to run",
        flush=True,
    )
    data = _data(config) if todo else None
    if data is not None:
        check_study_data(config, data)
    for index, run in enumerate(todo[:max_runs]):
        print(f"[compare] ({index + 1}/{len(todo)}) {run.key}", flush=True)
        if (
            run.kind == "finetune"
            and run.variant != CONTROL
            and not os.path.isfile(
                os.path.join(
                    _preset_dir(config, run.variant, run.pretrain_seed),
                    "config.json",
                )
            )
        ):
            again = Run("pretrain", run.variant, run.pretrain_seed)
            print(
                f"[compare] {again.key} again: its model is not on this "
                "machine and the fine-tuning needs it",
                flush=True,
            )
            _execute(config, again, data)
        _execute(config, run, data)
    return report(config)


def draw_bias_map(config, run):
    """Positional-bias heat map of a trained model (needs the model)."""
    import numpy as np

    from tupe_tf.analysis import figures
    from tupe_tf.models.tupe_backbone import TupeBackbone

    backbone = TupeBackbone.from_preset(
        _preset_dir(config, run.variant, run.seed)
    )
    if not np.any(backbone.positional_bias(config.seq_length)):
        return None  # positions only at the input: no bias to draw
    return figures.plot_positional_bias(
        backbone,
        config.seq_length,
        os.path.join(
            config.figures_dir, config.name, f"bias_{run.variant}.png"
        ),
        name=run.variant,
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
    fingerprints = {run.get("data_fingerprint") for run in pretrain + finetune}
    if len(fingerprints) > 1:
        raise ValueError(
            f"The runs under {study_dir(config)} were trained on different "
            f"data (fingerprints {sorted(map(str, fingerprints))}): move the "
            "runs of the old data aside."
        )
    return pretrain, finetune


def report(config):
    """Tables and figures from the per-run JSON files only.

    Writes `<results_dir>/<name>/tables.md` and the figures under
    `<figures_dir>/<name>/`; returns a dict with `tables` (the markdown),
    `figures` and `total_wall_seconds`.
    """
    from tupe_tf.analysis import study_figures

    pretrain, finetune = load_results(config)
    recorded = pretrain + finetune
    # Variants on record stay in the tables and figures when a run names
    # fewer (`--variants=rope` to add seeds must not drop the others).
    on_record = {run["variant"] for run in recorded}
    order = [v for v in VARIANTS if v in config.variants or v in on_record]
    planned = plan_runs(config)
    done = {r.key for r in planned if os.path.isfile(result_path(config, r))}
    tables = render_tables(config, pretrain, finetune, order)
    total = sum(r["wall_seconds"] for r in recorded)
    cpu = sum(r.get("cpu_seconds", 0.0) for r in recorded)
    # Runs beyond the plan (a variant extended with more seeds) are in the
    # tables and in the total, so both counts are given.
    tables += (
        f"\nRuns finished: {len(done)} of {len(planned)} planned, "
        f"{len(recorded)} on record; the recorded runs' "
        f"total wall time: {total / 60:.1f} min, CPU time "
        f"{cpu / 60:.1f} min.\n"
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
        "total_cpu_seconds": cpu,
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
    median dev metric over fine-tuning seeds (ties: the smaller rate). The
    runs of every pre-training seed in `glue_pretrain_seeds` are pooled;
    `runs` counts them.
    `median_by_rate` keeps every swept rate's median, so a reader sees what
    the selection chose between.
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
                and (
                    variant == CONTROL
                    or r["pretrain_seed"] in config.fine_tuned_pretrain_seeds
                )
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
                "runs": len(by_lr[best]),
                # The control is not pre-trained: no seeds to list.
                "pretrain_seeds": []
                if variant == CONTROL
                else sorted(
                    {
                        r["pretrain_seed"]
                        for r in runs
                        if r["learning_rate"] == best
                    }
                ),
                "median_by_rate": {
                    lr: spreads[lr]["median"] for lr in sorted(spreads)
                },
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
        '"no difference" where the min-max intervals overlap. The '
        "validation loss is Keras's: summed over masked tokens, divided by "
        "all prediction slots (empty slots count as zero), so it is below "
        "the per-token held-out loss of the next table.\n"
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
        pooled = len(config.fine_tuned_pretrain_seeds) > 1
        lines.append("")
        lines.append(
            f"{task} dev {metric}: median [min, max] over fine-tuning seeds "
            + (
                "and the listed pre-training seeds' models, pooled, "
                if pooled
                else ""
            )
            + "at the selected learning rate; `vs control`: against the "
            "no-pre-training control.\n"
        )
        swept = len(config.glue_learning_rates) > 1
        header = ["variant", "learning rate", metric, "vs control"]
        if pooled:
            header.append("pre-training seeds (runs)")
        if swept:
            header.append("median at each rate")
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
            cells = [
                variant,
                f"{row['learning_rate']:g}",
                study_stats.format_spread(row["score"]),
                versus,
            ]
            if pooled:
                seeds = ",".join(str(s) for s in row["pretrain_seeds"])
                cells.append(f"{seeds or '-'} ({row['runs']})")
            if swept:
                cells.append(
                    ", ".join(
                        f"{lr:g}: {median:.3f}"
                        for lr, median in row["median_by_rate"].items()
                    )
                )
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
