"""Pre-training and GLUE fine-tuning for `tupe_tf` models.

Import explicitly: `from tupe_tf import training`. The public names below
load on first use (PEP 562), so that the scripts read their flags and
refuse bad ones before Keras and TensorFlow load (`training.config`
imports neither).
"""

from tupe_tf.utils import lazy_names

# Public name -> the module that defines it.
_PUBLIC = {
    "CheckpointSaver": "tupe_tf.training.callbacks",
    "NonFiniteLossError": "tupe_tf.training.callbacks",
    "NonFiniteLossGuard": "tupe_tf.training.callbacks",
    "TrainingLogger": "tupe_tf.training.callbacks",
    "GLUE_TASKS": "tupe_tf.training.config",
    "MODEL_SIZES": "tupe_tf.training.config",
    "GlueConfig": "tupe_tf.training.config",
    "ModelConfig": "tupe_tf.training.config",
    "OptimizerConfig": "tupe_tf.training.config",
    "PretrainConfig": "tupe_tf.training.config",
    "RuntimeConfig": "tupe_tf.training.config",
    "configure_logical_cpus": "tupe_tf.training.distribution",
    "create_strategy": "tupe_tf.training.distribution",
    "run_glue": "tupe_tf.training.finetune",
    "DistributedTrainingLoop": "tupe_tf.training.multi_worker",
    "WarmupLinearDecay": "tupe_tf.training.optimization",
    "create_optimizer": "tupe_tf.training.optimization",
    "PretrainingResult": "tupe_tf.training.pretrain",
    "run_pretraining": "tupe_tf.training.pretrain",
}

__all__ = sorted(_PUBLIC)
__getattr__, __dir__ = lazy_names.module_functions(__name__, _PUBLIC, __all__)
