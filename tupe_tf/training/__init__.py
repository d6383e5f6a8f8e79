"""Pre-training and GLUE fine-tuning for `tupe_tf` models.

Import explicitly: `from tupe_tf import training` (importing `tupe_tf`
alone does not load it).
"""

from tupe_tf.training.callbacks import CheckpointSaver
from tupe_tf.training.callbacks import NonFiniteLossError
from tupe_tf.training.callbacks import NonFiniteLossGuard
from tupe_tf.training.callbacks import TrainingLogger
from tupe_tf.training.config import GLUE_TASKS
from tupe_tf.training.config import MODEL_SIZES
from tupe_tf.training.config import GlueConfig
from tupe_tf.training.config import ModelConfig
from tupe_tf.training.config import OptimizerConfig
from tupe_tf.training.config import PretrainConfig
from tupe_tf.training.config import RuntimeConfig
from tupe_tf.training.distribution import configure_logical_cpus
from tupe_tf.training.distribution import create_strategy
from tupe_tf.training.distribution import describe_devices
from tupe_tf.training.finetune import run_glue
from tupe_tf.training.multi_worker import DistributedTrainingLoop
from tupe_tf.training.optimization import WarmupLinearDecay
from tupe_tf.training.optimization import create_optimizer
from tupe_tf.training.pretrain import PretrainingResult
from tupe_tf.training.pretrain import run_pretraining

__all__ = [
    "CheckpointSaver",
    "DistributedTrainingLoop",
    "GLUE_TASKS",
    "GlueConfig",
    "MODEL_SIZES",
    "ModelConfig",
    "NonFiniteLossError",
    "NonFiniteLossGuard",
    "OptimizerConfig",
    "PretrainConfig",
    "PretrainingResult",
    "RuntimeConfig",
    "TrainingLogger",
    "WarmupLinearDecay",
    "configure_logical_cpus",
    "create_optimizer",
    "create_strategy",
    "describe_devices",
    "run_glue",
    "run_pretraining",
]
