"""What the comparison study runs: its variants and its settings.

The variants come from the option table (`tupe_tf.utils.backbone_options.
POSITION_ENCODINGS`) plus the ablations in `ABLATIONS`, so a new position
encoding joins the study without an edit here. The no-pre-training control
(same dims, random initialisation, same fine-tuning) is the GLUE row
`CONTROL`.

Example:

>>> config = CompareConfig(output_dir="runs/my_study")
>>> config.study_results_dir
'runs/my_study/results/tiny_len64_steps2000'
"""

import dataclasses
import os
from typing import Optional
from typing import Sequence

from tupe_tf.training.config import MODEL_SIZES
from tupe_tf.training.config import SMALL_FINETUNE_RECIPE
from tupe_tf.training.config import SMALL_PRETRAIN_LEARNING_RATE
from tupe_tf.training.config import GlueConfig
from tupe_tf.training.config import OptimizerConfig
from tupe_tf.training.config import PretrainConfig
from tupe_tf.training.config import RuntimeConfig
from tupe_tf.utils.backbone_options import POSITION_ENCODINGS
from tupe_tf.utils.errors import UserError
from tupe_tf.utils.keyword_arguments import refuses_unknown_fields
from tupe_tf.utils.settings import Settings
from tupe_tf.utils.settings import at_least
from tupe_tf.utils.settings import between
from tupe_tf.utils.settings import nested
from tupe_tf.utils.settings import refuse_ignored
from tupe_tf.utils.settings import setting

# Ablations of a table entry: name -> (base encoding, extra options).
ABLATIONS = {"tupe-a-tie-cls": ("tupe-a", {"untie_cls": False})}
# The GLUE row of a randomly initialised model (`CONTROL_ENCODING` layout).
CONTROL = "no-pretraining"
CONTROL_ENCODING = "bert"
# Variants that get every seed of `seeds`, and run first: the learned
# absolute baseline, TUPE's relative variant and DIET's two.
CORE_VARIANTS = ("bert", "tupe-r", "diet-abs", "diet-rel")
REFERENCE = "bert"
# The variant without any position: the findings compare the others'
# curves with its curve at the same seed (until their positions matter),
# and their extension gaps with its gap, what packing the held-out text
# longer costs a model that cannot use positions.
NO_POSITIONS = "nope"


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


def study_pretraining():
    """The pre-training every run of the study shares, with the study's
    defaults; each run sets its model directory, seed, data, variant and
    evaluation interval (docs/results.md section 1: how the budget was
    chosen)."""
    return PretrainConfig(
        work_dir="runs/study_data",
        seq_length=64,
        keep_checkpoints=1,
        verbose=0,
        optimizer=OptimizerConfig(
            learning_rate=SMALL_PRETRAIN_LEARNING_RATE, warmup_ratio=0.05
        ),
        runtime=RuntimeConfig(jit_compile=True),
    )


def study_finetuning():
    """The fine-tuning every GLUE run of the study shares, with the study's
    defaults; each run sets its task, preset, learning rate and seed, and
    runs on the pre-training's runtime."""
    return GlueConfig(
        learning_rates=SMALL_FINETUNE_RECIPE["learning_rates"],
        seeds=(0, 1, 2),
        num_epochs=SMALL_FINETUNE_RECIPE["num_epochs"],
        seq_length=64,
        verbose=0,
    )


@refuses_unknown_fields
@dataclasses.dataclass
class CompareConfig(Settings):
    """What the study runs; every field with a help text is a flag of
    `scripts/compare.py`.

    The study nests the pre-training (`pretrain`) and fine-tuning
    (`finetune`) configurations that every run starts from, and offers
    some of their settings as its flags; `--jit_compile` applies to both.
    Each fine-tuning learning rate of `--glue_learning_rates` is its own
    run; the one with the best median metric on the selection split carved
    from the training file is reported (`study_summary.glue_summary`).

    Everything a run writes goes under `output_dir` unless `results_dir`
    or `figures_dir` name another place (the project's own study names
    `docs/results` and `docs/figures/compare`).

    Example:

    >>> CompareConfig().replace(pretrain=dict(num_train_steps=500)).name
    'tiny_len64_steps500'
    """

    output_dir: str = setting(
        "runs/study",
        help="The study's models and fine-tuning logs go to "
        "<output_dir>/<study name>/, and by default its results and figures "
        "to <output_dir>/results/ and <output_dir>/figures/.",
    )
    results_dir: Optional[str] = setting(
        None,
        help="Per-run JSON files and tables.md go to <results_dir>/<study "
        "name>/ (unset: <output_dir>/results).",
    )
    figures_dir: Optional[str] = setting(
        None,
        help="Figures go to <figures_dir>/<study name>/ (unset: "
        "<output_dir>/figures).",
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
        valid=at_least(0),
    )
    other_seeds: Sequence[int] = setting(
        (0,),
        help="Pre-training seeds of the other variants.",
        element_type=int,
        valid=at_least(0),
    )
    extrapolation_factors: Sequence[int] = setting(
        (2, 4),
        help="Held-out lengths as multiples of --seq_length; the longest "
        "is the models' max_sequence_length (their position tables).",
        element_type=int,
        valid=at_least(2),
    )
    beyond_table_factors: Sequence[int] = setting(
        (8,),
        help="Held-out lengths beyond the position tables, as multiples of "
        "--seq_length: evaluated only for the options that run at any "
        "length (their trained model rebuilt longer), and for rope also "
        "with each length scaling.",
        element_type=int,
        valid=at_least(2),
    )
    extension_steps: int = setting(
        0,
        help="Steps of a second pre-training phase that extends every "
        "variant's models of --extension_seeds to the tables' length (the "
        "longest held-out length): --init_from its preset, tables refilled "
        "by the rule of docs/spec.md, batches of the first phase's tokens "
        "per step; 0: no extension.",
        valid=at_least(0),
    )
    extension_seeds: Optional[Sequence[int]] = setting(
        None,
        help="Pre-training seeds whose models are extended (unset: the "
        "first of --seeds); a model that is not on this machine is "
        "pre-trained again first.",
        element_type=int,
        valid=at_least(0),
    )
    extension_train_files: Optional[Sequence[str]] = setting(
        None,
        help="Training shards at the extension length to use instead (tests).",
        flag=False,
    )
    eval_interval: int = setting(
        100,
        help="Steps between validation-loss points of the curve.",
        valid=at_least(1),
    )
    glue_tasks: Sequence[str] = setting(
        ("cola", "sst2"),
        help="GLUE tasks (fine-tuned when --glue_dir is set).",
        element_type=str,
    )
    glue_pretrain_seeds: Optional[Sequence[int]] = setting(
        None,
        help="Pre-training seeds whose models are fine-tuned (unset: the "
        "first of --seeds); a variant's runs at every listed seed it was "
        "pre-trained with are pooled in its GLUE row.",
        element_type=int,
        valid=at_least(0),
    )
    glue_variants: Sequence[str] = setting(
        CORE_VARIANTS,
        help="Variants whose models (those of --glue_pretrain_seeds) are "
        "fine-tuned (the control always is); each added variant adds "
        "len(glue_pretrain_seeds) x len(glue_tasks) x len(glue_seeds) "
        "fine-tuning runs.",
        element_type=str,
    )
    heldout_fraction: float = setting(
        0.08,
        help="Fraction of the corpus held out, by document.",
        valid=between(0, 1, low_open=True, high_open=True),
    )
    findings_docs: Sequence[str] = setting(
        (),
        help="Markdown files whose findings blocks of this study (between "
        "the markers of tupe_tf/analysis/study_findings_markdown.py) the "
        "report rewrites from the records (the project's: README.md, "
        "docs/results.md).",
        element_type=str,
    )
    probe_study: str = setting(
        "probes_len32",
        help="The position probes (scripts/probe.py) whose records, under "
        "<results_dir>/<probe_study>/probes/, fill the probe columns of the "
        "findings' choice table; empty: no probe columns.",
    )
    from_results: bool = setting(
        False,
        help="Only rebuild the tables, findings and figures from the "
        "per-run JSON files (no training, no models needed).",
    )
    max_runs: Optional[int] = setting(
        None,
        help="Stop after this many new runs (unset: all).",
        valid=at_least(1),
    )
    eval_files: Optional[dict] = setting(
        None, help="{length: files} to use instead (tests).", flag=False
    )
    pretrain: PretrainConfig = nested(
        study_pretraining,
        flags=(
            "work_dir",
            "model_size",
            "seq_length",
            "global_batch_size",
            "num_train_steps",
            "learning_rate",
            "warmup_ratio",
            "eval_steps",
            "jit_compile",
        ),
    )
    finetune: GlueConfig = nested(
        study_finetuning,
        flags={
            "glue_dir": "glue_dir",
            "learning_rates": "glue_learning_rates",
            "seeds": "glue_seeds",
            "num_epochs": "glue_epochs",
            "seq_length": "glue_seq_length",
            "batch_size": "glue_batch_size",
            "max_train_examples": "glue_max_train_examples",
        },
    )

    @property
    def name(self):
        """Directory name of the study: the settings a run depends on."""
        pretrain = self.pretrain
        return (
            f"{pretrain.model.model_size}_len{pretrain.seq_length}_steps"
            f"{pretrain.num_train_steps}"
        )

    @property
    def study_results_dir(self):
        """Where the per-run JSON files and `tables.md` of the study go."""
        root = self.results_dir or os.path.join(self.output_dir, "results")
        return os.path.join(root, self.name)

    @property
    def probe_results_dir(self):
        """Where the records of `probe_study` are, beside the study's
        (None without `probe_study`)."""
        if not self.probe_study:
            return None
        return os.path.join(
            os.path.dirname(self.study_results_dir), self.probe_study
        )

    @property
    def study_figures_dir(self):
        """Where the figures of the study go."""
        root = self.figures_dir or os.path.join(self.output_dir, "figures")
        return os.path.join(root, self.name)

    @property
    def study_output_dir(self):
        """Where the models and fine-tuning logs of the study go."""
        return os.path.join(self.output_dir, self.name)

    def output_locations(self):
        """`[(directory, flag)]`: where the study writes, and the flag that
        sets it (to name it when the directory is not writable)."""
        return [
            (self.study_output_dir, "--output_dir"),
            (
                self.study_results_dir,
                "--results_dir" if self.results_dir else "--output_dir",
            ),
            (
                self.study_figures_dir,
                "--figures_dir" if self.figures_dir else "--output_dir",
            ),
        ]

    @property
    def fine_tuned_pretrain_seeds(self):
        """`glue_pretrain_seeds`, or the first of `seeds` when unset."""
        if self.glue_pretrain_seeds is None:
            return [self.seeds[0]]
        return list(self.glue_pretrain_seeds)

    @property
    def extended_pretrain_seeds(self):
        """`extension_seeds`, or the first of `seeds` when unset."""
        if self.extension_seeds is None:
            return [self.seeds[0]]
        return list(self.extension_seeds)

    @property
    def eval_lengths(self):
        """The held-out lengths every model is built for and evaluated at."""
        length = self.pretrain.seq_length
        return [length] + [length * f for f in self.extrapolation_factors]

    @property
    def extension_length(self):
        """The length an extension trains at: the tables' length."""
        return max(self.eval_lengths)

    @property
    def extension_batch_size(self):
        """An extension's batch: the first phase's tokens per step."""
        pretrain = self.pretrain
        tokens = pretrain.global_batch_size * pretrain.seq_length
        return max(1, tokens // self.extension_length)

    @property
    def beyond_table_lengths(self):
        """Held-out lengths past `eval_lengths`, for length-free options."""
        return [self.pretrain.seq_length * f for f in self.beyond_table_factors]

    def study_settings(self):
        """Settings every run of the study must share (see `study.json`)."""
        pretrain = self.pretrain
        model = pretrain.model
        dims = {
            dim: getattr(model, dim)
            for dim in MODEL_SIZES[model.model_size]
            if getattr(model, dim) is not None
        }
        return {
            "model_size": model.model_size,
            "model_dims": dims or None,
            "seq_length": pretrain.seq_length,
            "eval_lengths": self.eval_lengths,
            "global_batch_size": pretrain.global_batch_size,
            "num_train_steps": pretrain.num_train_steps,
            "learning_rate": pretrain.optimizer.learning_rate,
            "warmup_ratio": pretrain.optimizer.warmup_ratio,
            "eval_interval": self.eval_interval,
            "eval_steps": pretrain.eval_steps,
            "heldout_fraction": self.heldout_fraction,
            # Epochs are part of a fine-tuning run's name; the rest of the
            # recipe must be the same for every fine-tuning run.
            "glue_recipe": {
                k: v for k, v in self.glue_recipe().items() if k != "epochs"
            },
        }

    def glue_recipe(self):
        """The fine-tuning settings a fine-tuning result depends on."""
        finetune = self.finetune
        return {
            "epochs": finetune.num_epochs,
            "seq_length": finetune.seq_length,
            "batch_size": finetune.batch_size,
            "max_train_examples": finetune.max_train_examples,
            "jit_compile": self.pretrain.runtime.jit_compile,
        }

    def check_rules(self):
        for flag, names in (
            ("--variants", self.variants),
            ("--glue_variants", self.glue_variants),
        ):
            unknown = [name for name in names if name not in VARIANTS]
            if unknown:
                raise UserError(
                    f"{flag} has unknown names {unknown}; valid: "
                    f"{list(VARIANTS)}"
                )
        if not self.seeds:
            raise UserError("--seeds must not be empty.")
        pretrained = set(self.seeds) | set(self.other_seeds)
        for flag, listed in (
            ("--glue_pretrain_seeds", self.fine_tuned_pretrain_seeds),
            ("--extension_seeds", self.extended_pretrain_seeds),
        ):
            stray = [s for s in listed if s not in pretrained]
            if stray or not listed:
                raise UserError(
                    f"{flag} {stray or '(empty)'}: every seed must be one "
                    f"of --seeds or --other_seeds ({sorted(pretrained)})."
                )
        steps = self.pretrain.num_train_steps
        if self.eval_interval > steps:
            raise UserError(
                "--eval_interval must be between 1 and --num_train_steps "
                f"(got {self.eval_interval} and {steps})."
            )
        longest = max(self.extrapolation_factors, default=1)
        if any(f <= longest for f in self.beyond_table_factors):
            raise UserError(
                f"--beyond_table_factors {list(self.beyond_table_factors)}: "
                "each must be larger than the largest of "
                f"--extrapolation_factors ({longest})."
            )
        refuse_ignored(
            self,
            ("max_runs",),
            not self.from_results,
            "while the study runs (without --from_results)",
        )
        if (
            self.extension_steps
            and self.pretrain.train_files
            and not self.extension_train_files
        ):
            raise UserError(
                "--extension_steps on the caller's own pretrain.train_files "
                "needs extension_train_files: training shards of length "
                f"{self.extension_length}."
            )
        for path in self.findings_docs:
            if not os.path.isfile(path):
                raise UserError(f"--findings_docs {path!r} is not a file.")
        glue_dir = self.finetune.glue_dir
        if glue_dir is not None and not os.path.isdir(glue_dir):
            raise UserError(f"--glue_dir {glue_dir!r} is not a directory.")
        if glue_dir is not None and not self.finetune.learning_rates:
            raise UserError("--glue_learning_rates must not be empty.")
