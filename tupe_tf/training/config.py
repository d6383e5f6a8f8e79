"""Configuration objects and the model-size table for training.

The dataclasses here are the single source of truth for every training
option: the absl mains in `scripts/` only translate flags into them, and the
library entry points (`run_pretraining`, `run_glue`) only read them.
"""

import dataclasses
import os
from typing import Optional
from typing import Sequence

from tupe_tf.backbone_options import POSITION_ENCODINGS
from tupe_tf.backbone_options import POSITION_SHARINGS
from tupe_tf.backbone_options import SEGMENT_ENCODINGS


class InvalidInputError(ValueError):
    """Bad flags or files, found before training starts (nothing written)."""


# BERT's published dimensions (Devlin et al. 2019; Turc et al. 2019 for the
# compact ones). `tiny` is the few-minute CPU model.
MODEL_SIZES = {
    "tiny": dict(
        num_layers=2, num_heads=2, hidden_dim=128, intermediate_dim=512
    ),
    "mini": dict(
        num_layers=4, num_heads=4, hidden_dim=256, intermediate_dim=1024
    ),
    "small": dict(
        num_layers=4, num_heads=8, hidden_dim=512, intermediate_dim=2048
    ),
    "medium": dict(
        num_layers=8, num_heads=8, hidden_dim=512, intermediate_dim=2048
    ),
    "base": dict(
        num_layers=12, num_heads=12, hidden_dim=768, intermediate_dim=3072
    ),
    "large": dict(
        num_layers=24, num_heads=16, hidden_dim=1024, intermediate_dim=4096
    ),
}

MIXED_PRECISION_POLICIES = ("float32", "mixed_bfloat16", "mixed_float16")
STRATEGIES = (
    "default",
    "one_device",
    "mirrored",
    "multi_worker_mirrored",
    "tpu",
)


@dataclasses.dataclass
class ModelConfig:
    """Backbone dimensions and TUPE/DIET options.

    Args:
        model_size: a key of `MODEL_SIZES`. Explicit dims below override it.
        num_layers, num_heads, hidden_dim, intermediate_dim: explicit dims.
        dropout, max_sequence_length, num_segments, position_encoding,
        untie_cls, segment_encoding, position_rank, position_sharing,
        relative_buckets, relative_max_distance: passed unchanged to
            `tupe_tf.TupeBackbone`.

    Example:

    >>> ModelConfig(model_size="tiny", num_layers=1).dims()["num_layers"]
    1
    """

    model_size: str = "tiny"
    num_layers: Optional[int] = None
    num_heads: Optional[int] = None
    hidden_dim: Optional[int] = None
    intermediate_dim: Optional[int] = None
    dropout: float = 0.1
    max_sequence_length: int = 512
    num_segments: int = 2
    position_encoding: str = "tupe-r"
    untie_cls: bool = True
    segment_encoding: str = "input"
    position_rank: Optional[int] = None
    position_sharing: Optional[str] = None
    relative_buckets: int = 32
    relative_max_distance: int = 128

    def dims(self):
        if self.model_size not in MODEL_SIZES:
            raise ValueError(
                f"--model_size={self.model_size!r} is not one of "
                f"{sorted(MODEL_SIZES)}."
            )
        dims = dict(MODEL_SIZES[self.model_size])
        for key in dims:
            value = getattr(self, key)
            if value is not None:
                dims[key] = value
        if dims["hidden_dim"] % dims["num_heads"]:
            raise ValueError(
                f"hidden_dim={dims['hidden_dim']} is not divisible by "
                f"num_heads={dims['num_heads']}."
            )
        return dims

    def validate(self):
        self.dims()
        if self.position_encoding not in POSITION_ENCODINGS:
            raise ValueError(
                f"--position_encoding={self.position_encoding!r} is not one of "
                f"{list(POSITION_ENCODINGS)}."
            )
        if self.segment_encoding not in SEGMENT_ENCODINGS:
            raise ValueError(
                f"--segment_encoding={self.segment_encoding!r} is not one of "
                f"{list(SEGMENT_ENCODINGS)}."
            )
        if (
            self.position_sharing is not None
            and self.position_sharing not in POSITION_SHARINGS
        ):
            raise ValueError(
                f"--position_sharing={self.position_sharing!r} is not one of "
                f"{list(POSITION_SHARINGS)}."
            )

    def backbone_kwargs(self, vocabulary_size):
        """Keyword arguments for `tupe_tf.TupeBackbone`."""
        return dict(
            vocabulary_size=vocabulary_size,
            **self.dims(),
            dropout=self.dropout,
            max_sequence_length=self.max_sequence_length,
            num_segments=self.num_segments,
            position_encoding=self.position_encoding,
            untie_cls=self.untie_cls,
            segment_encoding=self.segment_encoding,
            position_rank=self.position_rank,
            position_sharing=self.position_sharing,
            relative_buckets=self.relative_buckets,
            relative_max_distance=self.relative_max_distance,
        )


@dataclasses.dataclass
class OptimizerConfig:
    """AdamW with warm-up and linear decay; defaults are TUPE Table 2.

    Args:
        learning_rate: peak learning rate (pre-training default 1e-4).
        warmup_steps: linear warm-up steps. Takes precedence over
            `warmup_ratio` when set.
        warmup_ratio: warm-up as a fraction of the total steps.
        weight_decay: decoupled weight decay, not applied to LayerNorm
            parameters and biases.
        beta_1, beta_2, epsilon: Adam's moments and epsilon.
        clipnorm: global gradient-norm clipping (`None` disables it).
    """

    learning_rate: float = 1e-4
    warmup_steps: Optional[int] = None
    warmup_ratio: float = 0.01
    weight_decay: float = 0.01
    beta_1: float = 0.9
    beta_2: float = 0.999
    epsilon: float = 1e-6
    clipnorm: Optional[float] = 1.0

    def resolve_warmup_steps(self, num_train_steps):
        if self.warmup_steps is not None:
            if self.warmup_steps < 0:
                raise ValueError(
                    f"--warmup_steps={self.warmup_steps} is negative."
                )
            return min(int(self.warmup_steps), int(num_train_steps))
        if not 0.0 <= self.warmup_ratio <= 1.0:
            raise ValueError(
                f"--warmup_ratio={self.warmup_ratio} is not in [0, 1]."
            )
        return int(round(self.warmup_ratio * num_train_steps))


@dataclasses.dataclass
class RuntimeConfig:
    """Distribution and performance settings.

    Args:
        strategy: one of `STRATEGIES`.
        tpu: TPU name or `grpc://` address (`--strategy=tpu`); `"local"` on a
            TPU VM.
        num_cpu_devices: with `mirrored` on a machine without GPUs, split the
            CPU into this many logical devices (must happen before TF starts).
        mixed_precision: a Keras dtype policy name.
        jit_compile: XLA-compile the train step.
        steps_per_execution: train steps per `tf.function` call.
    """

    strategy: str = "default"
    tpu: Optional[str] = None
    num_cpu_devices: Optional[int] = None
    mixed_precision: str = "float32"
    jit_compile: bool = False
    steps_per_execution: int = 1

    def validate(self):
        if self.strategy not in STRATEGIES:
            raise ValueError(
                f"--strategy={self.strategy!r} is not one of {list(STRATEGIES)}."
            )
        if self.mixed_precision not in MIXED_PRECISION_POLICIES:
            raise ValueError(
                f"--mixed_precision={self.mixed_precision!r} is not one of "
                f"{list(MIXED_PRECISION_POLICIES)}."
            )
        if self.steps_per_execution < 1:
            raise ValueError(
                f"--steps_per_execution={self.steps_per_execution} must be >= 1."
            )
        if self.steps_per_execution > 1 and self.strategy in (
            "mirrored",
            "multi_worker_mirrored",
        ):
            # TPUStrategy is fine (and wants it); the Mirrored family is not.
            raise ValueError(
                f"--steps_per_execution={self.steps_per_execution} is "
                f"not supported with --strategy={self.strategy}: "
                "Keras 3.15's fit fails with it under MirroredStrategy, and the "
                "multi-worker loop runs one step per call. Use "
                "--steps_per_execution=1."
            )


@dataclasses.dataclass
class PretrainConfig:
    """Everything `run_pretraining` needs.

    Args:
        model_dir: where checkpoints, TensorBoard logs, the final preset and
            `results.json` go. Rerunning with the same `model_dir` resumes.
        train_files, eval_files: TFRecord shard patterns from
            `scripts/build_shards.py`. When `train_files` is empty the
            embedded Wikipedia sample is turned into a vocabulary and shards
            under `work_dir` (reused when present and matching).
        vocab_file: WordPiece vocabulary the shards were built with.
        work_dir: where the default vocabulary and shards are built.
        seq_length: tokens per example (must equal the shards' length).
        max_predictions_per_seq, mask_rate: MLM masking.
        global_batch_size: examples per step summed over all replicas.
        num_train_steps: optimizer steps in total (including resumed ones).
        save_every: checkpoint interval in steps (also the Keras "epoch").
        eval_every: evaluation interval in steps, rounded up to a multiple
            of `save_every` (0: evaluate only at the end).
        eval_steps: batches per evaluation.
        log_every: TensorBoard scalar interval in steps.
        keep_checkpoints: checkpoints kept on disk.
        seed: shuffling/masking/initialisation seed (makes the data order
            reproducible, which is what lets a resumed run skip ahead).
        shuffle_buffer: examples in the shuffle buffer.
        verbose: Keras progress-bar mode (1 bar, 2 one line per epoch).
    """

    model_dir: str = "./runs/default/model"
    train_files: Sequence[str] = ()
    eval_files: Sequence[str] = ()
    vocab_file: Optional[str] = None
    work_dir: str = "./runs/default"
    seq_length: int = 128
    max_predictions_per_seq: Optional[int] = None
    mask_rate: float = 0.15
    global_batch_size: int = 32
    num_train_steps: int = 2000
    save_every: int = 200
    eval_every: int = 1000
    eval_steps: int = 20
    log_every: int = 20
    keep_checkpoints: int = 3
    seed: int = 0
    shuffle_buffer: int = 10000
    verbose: int = 1
    model: ModelConfig = dataclasses.field(default_factory=ModelConfig)
    optimizer: OptimizerConfig = dataclasses.field(
        default_factory=OptimizerConfig
    )
    runtime: RuntimeConfig = dataclasses.field(default_factory=RuntimeConfig)

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


GLUE_TASKS = (
    "cola",
    "sst2",
    "mrpc",
    "stsb",
    "qqp",
    "mnli",
    "qnli",
    "rte",
    "wnli",
)


@dataclasses.dataclass
class GlueConfig:
    """Everything `run_glue` needs. Defaults follow TUPE Table 2.

    Args:
        task: one of `GLUE_TASKS` (`mnli` reports matched and mismatched).
        preset: a pre-trained preset directory (from `run_pretraining`).
        output_dir: where `results.json` (and per-run logs) go.
        glue_dir: official-layout GLUE TSV directory; TFDS `glue/<task>`
            when not given.
        tfds_data_dir: TFDS data directory.
        seq_length: tokens per (pair of) sentence(s).
        learning_rates: learning rates swept (one run each per seed).
        seeds: seeds per learning rate; the median over seeds is reported.
        batch_size, num_epochs, warmup_ratio, weight_decay: the recipe.
        max_train_examples, max_eval_examples: caps for quick runs.
    """

    task: str = "sst2"
    preset: Optional[str] = None
    output_dir: str = "./runs/glue"
    glue_dir: Optional[str] = None
    tfds_data_dir: Optional[str] = None
    seq_length: int = 128
    learning_rates: Sequence[float] = (2e-5, 3e-5, 4e-5, 5e-5)
    seeds: Sequence[int] = (0, 1, 2, 3, 4)
    batch_size: int = 32
    num_epochs: int = 10
    warmup_ratio: float = 0.06
    weight_decay: float = 0.01
    dropout: float = 0.1
    max_train_examples: Optional[int] = None
    max_eval_examples: Optional[int] = None
    verbose: int = 1
    runtime: RuntimeConfig = dataclasses.field(default_factory=RuntimeConfig)
