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

from tupe_tf.training.config import SMALL_FINETUNE_RECIPE
from tupe_tf.training.config import SMALL_PRETRAIN_LEARNING_RATE
from tupe_tf.utils.backbone_options import POSITION_ENCODINGS
from tupe_tf.utils.errors import UserError
from tupe_tf.utils.keyword_arguments import refuses_unknown_fields
from tupe_tf.utils.settings import Settings
from tupe_tf.utils.settings import at_least
from tupe_tf.utils.settings import between
from tupe_tf.utils.settings import greater_than
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
class CompareConfig(Settings):
    """What the study runs; every field with a help text is a flag of
    `scripts/compare.py`.

    Everything a run writes goes under `output_dir` unless `results_dir`
    or `figures_dir` name another place (the project's own study names
    `docs/results` and `docs/figures/compare`).

    Example:

    >>> CompareConfig(num_train_steps=500).name
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
        valid=at_least(0),
    )
    other_seeds: Sequence[int] = setting(
        (0,),
        help="Pre-training seeds of the other variants.",
        element_type=int,
        valid=at_least(0),
    )
    model_size: str = setting(
        "tiny", help="A key of tupe_tf.training.MODEL_SIZES."
    )
    model_dims: Optional[dict] = setting(
        None, help="Explicit dims overriding model_size (tests).", flag=False
    )
    seq_length: int = setting(
        64, help="Pre-training sequence length.", valid=at_least(3)
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
    global_batch_size: int = setting(
        32, help="Pre-training batch.", valid=at_least(1)
    )
    # Fewer steps (or a smaller batch) leave a variant on the unigram
    # plateau on the study's data (docs/results.md).
    num_train_steps: int = setting(
        2000, help="Pre-training steps per run.", valid=at_least(1)
    )
    learning_rate: float = setting(
        SMALL_PRETRAIN_LEARNING_RATE,
        help="Pre-training peak rate.",
        valid=greater_than(0),
    )
    warmup_ratio: float = setting(
        0.05,
        help="Pre-training warm-up fraction.",
        valid=between(0, 1, high_open=True),
    )
    eval_interval: int = setting(
        100,
        help="Steps between validation-loss points of the curve.",
        valid=at_least(1),
    )
    eval_steps: int = setting(
        20, help="Validation batches per point.", valid=at_least(1)
    )
    plateau_loss: float = setting(
        5.7,
        help="Validation loss of the plateau; the exit step is the first "
        "point study_stats.PLATEAU_MARGIN below it (report only).",
        valid=greater_than(0),
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
        valid=greater_than(0),
    )
    glue_seeds: Sequence[int] = setting(
        (0, 1, 2),
        help="Fine-tuning seeds.",
        element_type=int,
        valid=at_least(0),
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
    jit_compile: bool = setting(
        True,
        help="XLA-compile the pre-training and fine-tuning steps (faster "
        "steps; docs/benchmarks.md measures them).",
    )
    glue_epochs: int = setting(
        SMALL_FINETUNE_RECIPE["num_epochs"],
        help="Fine-tuning epochs.",
        valid=at_least(1),
    )
    glue_seq_length: int = setting(
        64, help="Fine-tuning sequence length.", valid=at_least(3)
    )
    glue_batch_size: int = setting(
        32, help="Fine-tuning batch.", valid=at_least(1)
    )
    glue_max_train_examples: Optional[int] = setting(
        None,
        help="Cap on fine-tuning training examples (unset: all).",
        valid=at_least(1),
    )
    heldout_fraction: float = setting(
        0.08,
        help="Fraction of the corpus held out, by document.",
        valid=between(0, 1, low_open=True, high_open=True),
    )
    from_results: bool = setting(
        False,
        help="Only rebuild the tables and figures from the per-run JSON "
        "files (no training, no models needed).",
    )
    max_runs: Optional[int] = setting(
        None,
        help="Stop after this many new runs (unset: all).",
        valid=at_least(1),
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
    def study_results_dir(self):
        """Where the per-run JSON files and `tables.md` of the study go."""
        root = self.results_dir or os.path.join(self.output_dir, "results")
        return os.path.join(root, self.name)

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
    def eval_lengths(self):
        """The held-out lengths every model is built for and evaluated at."""
        return [self.seq_length] + [
            self.seq_length * f for f in self.extrapolation_factors
        ]

    @property
    def beyond_table_lengths(self):
        """Held-out lengths past `eval_lengths`, for length-free options."""
        return [self.seq_length * f for f in self.beyond_table_factors]

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
        stray = [
            s for s in self.fine_tuned_pretrain_seeds if s not in pretrained
        ]
        if stray or not self.fine_tuned_pretrain_seeds:
            raise UserError(
                f"--glue_pretrain_seeds {stray or '(empty)'}: every seed must "
                f"be one of --seeds or --other_seeds ({sorted(pretrained)})."
            )
        if not 1 <= self.eval_interval <= self.num_train_steps:
            raise UserError(
                "--eval_interval must be between 1 and --num_train_steps "
                f"(got {self.eval_interval} and {self.num_train_steps})."
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
        if self.glue_dir is not None and not os.path.isdir(self.glue_dir):
            raise UserError(f"--glue_dir {self.glue_dir!r} is not a directory.")
        if self.glue_dir is not None and not self.glue_learning_rates:
            raise UserError("--glue_learning_rates must not be empty.")
