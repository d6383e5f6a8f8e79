"""Configuration objects and the model-size table for training.

The dataclasses here are the single source of truth for every training
option, its default and its help: the scripts' flags are generated from them
(`tupe_tf.utils.config_flags`), and the library entry points
(`run_pretraining`, `run_glue`) only read them.
"""

import dataclasses
import os
from typing import Optional
from typing import Sequence

from data_pipeline import glue
from data_pipeline import masking
from tupe_tf.utils.backbone_options import MODEL_SIZES
from tupe_tf.utils.backbone_options import BackboneOptions
from tupe_tf.utils.errors import UserError
from tupe_tf.utils.keyword_arguments import refuses_unknown_fields
from tupe_tf.utils.settings import Settings
from tupe_tf.utils.settings import at_least
from tupe_tf.utils.settings import between
from tupe_tf.utils.settings import greater_than
from tupe_tf.utils.settings import nested
from tupe_tf.utils.settings import refuse_ignored
from tupe_tf.utils.settings import setting

# Learning recipes by model scale, keyed on the hidden size. The paper's
# (TUPE Table 2) are for BERT-base; the small-model values were chosen on
# `tiny` in docs/results.md sections 1-2 (mini and small were not measured).
SMALL_PRETRAIN_HIDDEN_DIM = 128  # `tiny`
SMALL_PRETRAIN_LEARNING_RATE = 1e-3
PAPER_PRETRAIN_LEARNING_RATE = 1e-4
SMALL_FINETUNE_HIDDEN_DIM = 512  # `tiny`, `mini`, `small`
SMALL_FINETUNE_RECIPE = {"learning_rates": (1e-3,), "num_epochs": 3}
# The TUPE authors' GLUE fine-tuning (guolinke/TUPE README, "Fine-Tuning"):
# every rate x 5 seeds, the median per rate, the best rate's median. Their
# Adam and schedule are `GlueConfig`'s defaults whatever the recipe.
PAPER_FINETUNE_RECIPE = {
    "learning_rates": (2e-5, 3e-5, 4e-5, 5e-5),
    "num_epochs": 10,
}
# Their shorter runs on the three largest tasks.
PAPER_FINETUNE_EPOCHS_BY_TASK = {"mnli": 5, "qnli": 5, "qqp": 5}
PAPER_FINETUNE_OPTIMIZER = {
    "warmup_ratio": 0.06,
    "weight_decay": 0.01,
    "beta_1": 0.9,
    "beta_2": 0.999,
    "epsilon": 1e-6,
    "clipnorm": 1.0,
}
PAPER_FINETUNE_BATCH_SIZE = 32
PAPER_FINETUNE_SEEDS = (0, 1, 2, 3, 4)
FINETUNE_RECIPES = {
    "tupe_paper": PAPER_FINETUNE_RECIPE,
    "small": SMALL_FINETUNE_RECIPE,
}


def default_pretrain_learning_rate(hidden_dim):
    """The peak learning rate when `--learning_rate` is not given."""
    if hidden_dim <= SMALL_PRETRAIN_HIDDEN_DIM:
        return SMALL_PRETRAIN_LEARNING_RATE
    return PAPER_PRETRAIN_LEARNING_RATE


def default_finetune_recipe_name(hidden_dim):
    """The key of `FINETUNE_RECIPES` for a preset of this hidden size."""
    return "small" if hidden_dim <= SMALL_FINETUNE_HIDDEN_DIM else "tupe_paper"


def default_finetune_recipe(hidden_dim, task=None, recipe=None):
    """`{learning_rates, num_epochs}` when the flags are not given.

    Args:
        hidden_dim: the preset's hidden size, which picks the recipe when
            `recipe` is None (`default_finetune_recipe_name`).
        task: the GLUE task, whose epochs the paper's recipe sets.
        recipe: a key of `FINETUNE_RECIPES`, or None.
    """
    recipe = recipe or default_finetune_recipe_name(hidden_dim)
    values = dict(FINETUNE_RECIPES[recipe])
    if recipe == "tupe_paper":
        values["num_epochs"] = PAPER_FINETUNE_EPOCHS_BY_TASK.get(
            task, values["num_epochs"]
        )
    return values


OPTIMIZERS = ("adamw", "lamb")
MIXED_PRECISION_POLICIES = ("float32", "mixed_bfloat16", "mixed_float16")
STRATEGIES = (
    "default",
    "one_device",
    "mirrored",
    "multi_worker_mirrored",
    "tpu",
)


_DIMS_HELP = "Overrides --model_size."


@refuses_unknown_fields
@dataclasses.dataclass
class ModelConfig(BackboneOptions, Settings):
    """Backbone dimensions and options: `model_size` names a row of
    `MODEL_SIZES` and the four dims override it; the backbone options are
    the inherited fields of `tupe_tf.utils.backbone_options.BackboneOptions`
    (default, help, choices, range), passed unchanged to `TupeBackbone`.

    Example:

    >>> ModelConfig(model_size="tiny", num_layers=1).dims()["num_layers"]
    1
    """

    model_size: str = setting(
        "tiny",
        help="BERT dimensions (a row of MODEL_SIZES).",
        choices=sorted(MODEL_SIZES),
    )
    num_layers: Optional[int] = setting(
        None, help=_DIMS_HELP, valid=at_least(1)
    )
    num_heads: Optional[int] = setting(None, help=_DIMS_HELP, valid=at_least(1))
    hidden_dim: Optional[int] = setting(
        None, help=_DIMS_HELP, valid=at_least(1)
    )
    intermediate_dim: Optional[int] = setting(
        None, help=_DIMS_HELP, valid=at_least(1)
    )

    def dims(self):
        """The four BERT dims: `model_size`'s row with the given overrides."""
        dims = dict(MODEL_SIZES[self.model_size])
        for key in dims:
            value = getattr(self, key)
            if value is not None:
                dims[key] = value
        if dims["hidden_dim"] % dims["num_heads"]:
            raise UserError(
                f"hidden_dim={dims['hidden_dim']} is not divisible by "
                f"num_heads={dims['num_heads']}."
            )
        return dims

    def check_rules(self):
        self.dims()

    def backbone_kwargs(self, vocabulary_size):
        """Keyword arguments for `tupe_tf.TupeBackbone`: the dims, then
        every other field (the backbone options)."""
        dims = self.dims()
        options = {
            field.name: getattr(self, field.name)
            for field in dataclasses.fields(self)
            if field.name != "model_size" and field.name not in dims
        }
        return dict(vocabulary_size=vocabulary_size, **dims, **options)


@refuses_unknown_fields
@dataclasses.dataclass
class OptimizerConfig(Settings):
    """AdamW (or LAMB) with warm-up and linear decay; defaults are TUPE
    Table 2.

    Each field's help is its metadata (`setting(help=...)`).
    """

    algorithm: str = setting(
        "adamw",
        flag="optimizer",
        help="adamw (TUPE's) or lamb (You et al. 2020, for large batches: "
        "AdamW's update scaled per variable by a trust ratio); both decay "
        "all but LayerNorm and biases.",
        choices=OPTIMIZERS,
    )

    learning_rate: Optional[float] = setting(
        None,
        help=f"Peak learning rate (default: {SMALL_PRETRAIN_LEARNING_RATE:g} "
        f"up to hidden size {SMALL_PRETRAIN_HIDDEN_DIM}, i.e. tiny, measured "
        f"in docs/results.md; {PAPER_PRETRAIN_LEARNING_RATE:g} above, the "
        "paper's).",
        valid=greater_than(0),
    )
    warmup_steps: Optional[int] = setting(
        None,
        help="Linear warm-up steps (overrides --warmup_ratio).",
        valid=at_least(0),
    )
    warmup_ratio: float = setting(
        0.01,
        help="Warm-up as a fraction of the training steps.",
        valid=between(0, 1, high_open=True),
    )
    weight_decay: float = setting(
        0.01,
        help="Decoupled weight decay (not on LayerNorm/biases).",
        valid=at_least(0),
    )
    beta_1: float = setting(
        0.9, help="Adam beta_1.", valid=between(0, 1, high_open=True)
    )
    beta_2: float = setting(
        0.999, help="Adam beta_2.", valid=between(0, 1, high_open=True)
    )
    epsilon: float = setting(1e-6, help="Adam epsilon.", valid=greater_than(0))
    clipnorm: Optional[float] = setting(
        1.0,
        help="Global gradient-norm clip (0 or None disables it).",
        valid=at_least(0),
    )

    def __post_init__(self):
        if self.clipnorm == 0:
            self.clipnorm = None

    def resolve_warmup_steps(self, num_train_steps):
        """Warm-up steps: `warmup_steps` (at most `num_train_steps`), else
        `warmup_ratio` of them."""
        if self.warmup_steps is not None:
            return min(int(self.warmup_steps), int(num_train_steps))
        return int(round(self.warmup_ratio * num_train_steps))


@refuses_unknown_fields
@dataclasses.dataclass
class RuntimeConfig(Settings):
    """Distribution and performance settings (help: field metadata)."""

    strategy: str = setting(
        "default", help="tf.distribute strategy.", choices=STRATEGIES
    )
    tpu: Optional[str] = setting(
        None,
        help="TPU name or grpc:// address for --strategy=tpu ('local' on a "
        "TPU VM).",
    )
    num_cpu_devices: Optional[int] = setting(
        None,
        help="Logical CPU devices for --strategy=mirrored without GPUs "
        "(set before TensorFlow starts).",
        valid=at_least(1),
    )
    mixed_precision: str = setting(
        "float32",
        help="Keras dtype policy (mixed_bfloat16 on TPU; mixed_float16 adds "
        "loss scaling).",
        choices=MIXED_PRECISION_POLICIES,
    )
    jit_compile: Optional[bool] = setting(
        None,
        help="XLA-compile the train step. Unset: on, except with "
        "--strategy=mirrored on CPU devices, where TensorFlow cannot "
        "XLA-compile the replicas' steps (docs/training.md).",
    )
    steps_per_execution: int = setting(
        1, help="Train steps per tf.function call.", valid=at_least(1)
    )

    def check_rules(self):
        refuse_ignored(
            self, ("tpu",), self.strategy == "tpu", "with --strategy=tpu"
        )
        refuse_ignored(
            self,
            ("num_cpu_devices",),
            self.strategy == "mirrored",
            "with --strategy=mirrored",
        )
        if self.steps_per_execution > 1 and self.strategy in (
            "mirrored",
            "multi_worker_mirrored",
        ):
            # TPUStrategy is fine (and wants it); the Mirrored family is not.
            raise UserError(
                f"--steps_per_execution={self.steps_per_execution} is "
                f"not supported with --strategy={self.strategy}: "
                "Keras 3.15's fit fails with it under MirroredStrategy, and the "
                "multi-worker loop runs one step per call. Use "
                "--steps_per_execution=1."
            )


@refuses_unknown_fields
@dataclasses.dataclass
class PretrainConfig(masking.WholeWordMaskingSettings):
    """Everything `run_pretraining` needs (help: field metadata).

    Rerunning with the same `model_dir` resumes. When `train_files` is empty
    the embedded Wikipedia sample is turned into a vocabulary and shards under
    `work_dir` (reused when present and matching).
    """

    model_dir: Optional[str] = setting(
        None,
        help="Checkpoints, TensorBoard logs, the final preset and "
        "results.json (default: <work_dir>/model). Rerunning resumes.",
    )
    train_files: Sequence[str] = setting(
        (),
        help="Training shard patterns from scripts/build_shards.py "
        "(default: built from the embedded corpus).",
    )
    eval_files: Sequence[str] = setting((), help="Evaluation shard patterns.")
    vocab_file: Optional[str] = setting(
        None,
        help="Vocabulary the shards were built with; without --train_files, "
        "the one the default shards are built with (uncased; otherwise a "
        "vocabulary is learned under --work_dir).",
    )
    work_dir: str = setting(
        "./runs/default", help="Where default data (and model_dir) go."
    )
    init_from: Optional[str] = setting(
        None,
        help="Start a new run (fresh optimizer and step) from this preset's "
        "weights: a tupe-tf preset (<model_dir>/preset; the model flags as "
        "there, a longer --max_sequence_length grows its position tables) "
        "or a keras-hub BertBackbone preset directory (any "
        "--position_encoding).",
    )
    seq_length: int = setting(
        128, help="Sequence length of the shards.", valid=at_least(3)
    )
    max_predictions_per_seq: Optional[int] = setting(
        None, help="Masked positions per sequence.", valid=at_least(1)
    )
    mask_rate: float = setting(
        0.15,
        help="Fraction of tokens masked.",
        valid=between(0, 1, low_open=True, high_open=True),
    )
    global_batch_size: int = setting(
        32,
        help="Examples per step summed over all replicas.",
        valid=at_least(1),
    )
    gradient_accumulation_steps: int = setting(
        1,
        help="Micro-batches per optimizer step: each replica's share of "
        "--global_batch_size runs forward and backward in this many parts, "
        "whose mean gradient makes one update (memory follows the part; "
        "steps, schedule, logs and checkpoints count updates).",
        valid=at_least(1),
    )
    num_train_steps: int = setting(
        2000,
        help="Optimizer steps in total (resumed ones included).",
        valid=at_least(1),
    )
    save_every: int = setting(
        200,
        help="Checkpoint interval in steps (also the Keras epoch).",
        valid=at_least(1),
    )
    eval_every: int = setting(
        1000,
        help="Evaluation interval in steps, rounded up to a multiple of "
        "--save_every (0: end only).",
        valid=at_least(0),
    )
    eval_steps: int = setting(
        20, help="Batches per evaluation.", valid=at_least(1)
    )
    log_every: int = setting(
        20, help="TensorBoard interval in steps.", valid=at_least(1)
    )
    keep_checkpoints: int = setting(
        3, help="Checkpoints kept on disk.", valid=at_least(1)
    )
    seed: int = setting(
        0,
        help="Data order, masking and initialisation seed (a resumed run "
        "skips ahead in the same order).",
        valid=at_least(0),
    )
    shuffle_buffer: int = setting(
        10000, help="Shuffle buffer in examples.", valid=at_least(1)
    )
    skip_bad_shards: bool = setting(
        False,
        help="Train without the shards that fail their manifest check or "
        "turn out corrupted while read (logged), instead of stopping.",
    )
    watch_gce_maintenance: Optional[bool] = setting(
        None,
        help="Poll the GCE metadata server for a host maintenance that will "
        "terminate this VM (one with GPUs or TPUs) and stop as on SIGTERM, "
        "saving the step under way. Unset: with --strategy=tpu only.",
    )
    verbose: int = setting(
        1,
        help="Keras progress: 1 bar, 2 one line per epoch, 0 silent.",
        valid=between(0, 2),
    )
    model: ModelConfig = dataclasses.field(default_factory=ModelConfig)
    optimizer: OptimizerConfig = dataclasses.field(
        default_factory=OptimizerConfig
    )
    runtime: RuntimeConfig = dataclasses.field(default_factory=RuntimeConfig)

    def __post_init__(self):
        if self.model_dir is None:
            self.model_dir = os.path.join(self.work_dir, "model")

    @property
    def checkpoint_dir(self):
        return os.path.join(self.model_dir, "checkpoints")

    @property
    def log_dir(self):
        return os.path.join(self.model_dir, "logs")

    @property
    def preset_dir(self):
        return os.path.join(self.model_dir, "preset")

    def to_dict(self):
        return dataclasses.asdict(self)


# `data_pipeline.glue.GLUE_TASKS`' names: the one table of the GLUE tasks.
GLUE_TASKS = glue.TASK_NAMES


@refuses_unknown_fields
@dataclasses.dataclass
class GlueConfig(Settings):
    """Everything `run_glue` needs. Defaults follow the TUPE authors'
    fine-tuning (`PAPER_FINETUNE_*`; `recipe` picks the rates and epochs).

    Help: field metadata. Results go to `<output_dir>/<task>/results.json`.
    """

    task: str = setting(
        "sst2",
        help="GLUE task (mnli reports matched and mismatched).",
        choices=GLUE_TASKS,
    )
    preset: Optional[str] = setting(
        None, help="Pre-trained preset directory (from scripts/pretrain.py)."
    )
    output_dir: str = setting(
        "./runs/glue", help="Where <task>/results.json goes."
    )
    glue_dir: Optional[str] = setting(
        None, help="Official-layout GLUE TSV directory (default: TFDS)."
    )
    tfds_data_dir: Optional[str] = setting(
        None, help="TFDS data directory (GLUE from TFDS, without --glue_dir)."
    )
    seq_length: int = setting(
        128,
        help="Tokens per example (sentence pairs included).",
        valid=at_least(3),
    )
    pad_to_longest: bool = setting(
        False,
        help="Pad each batch to its longest example (rounded up to a "
        "multiple of 16) instead of to --seq_length, as the TUPE authors' "
        "fine-tuning does; --seq_length still truncates. Not on TPU.",
    )
    recipe: Optional[str] = setting(
        None,
        help="Learning rates and epochs where --learning_rates and "
        "--num_epochs are not given: tupe_paper (the TUPE authors': "
        f"{list(PAPER_FINETUNE_RECIPE['learning_rates'])}, "
        f"{PAPER_FINETUNE_RECIPE['num_epochs']} epochs, "
        + ", ".join(
            f"{k} {v}" for k, v in PAPER_FINETUNE_EPOCHS_BY_TASK.items()
        )
        + ") or small "
        f"({list(SMALL_FINETUNE_RECIPE['learning_rates'])}, "
        f"{SMALL_FINETUNE_RECIPE['num_epochs']} epochs, measured on tiny). "
        f"Default: small up to hidden size {SMALL_FINETUNE_HIDDEN_DIM} "
        "(tiny, mini, small), tupe_paper above.",
        choices=tuple(FINETUNE_RECIPES),
    )
    learning_rates: Optional[Sequence[float]] = setting(
        None,
        help="Learning rates swept, one run each per seed (default: "
        "--recipe's).",
        element_type=float,
        valid=greater_than(0),
    )
    seeds: Sequence[int] = setting(
        PAPER_FINETUNE_SEEDS,
        help="Seeds per learning rate (median reported).",
        valid=at_least(0),
    )
    batch_size: int = setting(
        PAPER_FINETUNE_BATCH_SIZE, help="Batch size.", valid=at_least(1)
    )
    num_epochs: Optional[int] = setting(
        None, help="Epochs (default: --recipe's).", valid=at_least(1)
    )
    selection_fraction: float = setting(
        0.1,
        help="Share of the training file held out, stratified by label "
        "(STS-B: by score quintile) with a fixed seed, to choose the "
        "learning rate on; the rest is trained on, and the evaluation "
        "file(s) are scored once, at the chosen rate.",
        valid=between(0, 1, low_open=True, high_open=True),
    )
    optimizer: OptimizerConfig = nested(
        lambda: OptimizerConfig(**PAPER_FINETUNE_OPTIMIZER),
        flags=("warmup_ratio", "weight_decay"),
    )
    dropout: float = setting(
        0.1, help="Classifier dropout.", valid=between(0, 1, high_open=True)
    )
    max_train_examples: Optional[int] = setting(
        None, help="Cap on training examples (quick runs).", valid=at_least(1)
    )
    max_eval_examples: Optional[int] = setting(
        None,
        help="Cap on evaluation examples (quick runs).",
        valid=at_least(1),
    )
    verbose: int = setting(
        2,
        help="Keras progress: 1 bar, 2 one line per epoch, 0 silent.",
        valid=between(0, 2),
    )
    runtime: RuntimeConfig = dataclasses.field(default_factory=RuntimeConfig)
