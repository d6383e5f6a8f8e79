"""The runtime flags both training scripts take, and their `RuntimeConfig`.

`scripts/pretrain.py` and `scripts/finetune_glue.py` share these, so a
strategy, precision or XLA setting is spelled the same way in both.

Example:

>>> from absl import flags
>>> from tupe_tf.training import runtime_flags
>>> runtime_flags.define_runtime_flags()
>>> # after absl parses argv:
>>> runtime = runtime_flags.runtime_config_from_flags()  # doctest: +SKIP
"""

from absl import flags

from tupe_tf.training import config as config_lib


def define_runtime_flags(flag_values=flags.FLAGS):
    """Defines `--strategy --tpu --num_cpu_devices --mixed_precision
    --jit_compile --steps_per_execution` on `flag_values`."""
    flags.DEFINE_enum(
        "strategy",
        "default",
        list(config_lib.STRATEGIES),
        "tf.distribute strategy.",
        flag_values=flag_values,
    )
    flags.DEFINE_string(
        "tpu",
        None,
        "TPU name/address for --strategy=tpu ('local' on a TPU VM).",
        flag_values=flag_values,
    )
    flags.DEFINE_integer(
        "num_cpu_devices",
        None,
        "Logical CPU devices for --strategy=mirrored without GPUs.",
        flag_values=flag_values,
    )
    flags.DEFINE_enum(
        "mixed_precision",
        "float32",
        list(config_lib.MIXED_PRECISION_POLICIES),
        "Keras dtype policy (mixed_bfloat16 on TPU; mixed_float16 adds loss scaling).",
        flag_values=flag_values,
    )
    flags.DEFINE_boolean(
        "jit_compile",
        False,
        "XLA-compile the train step.",
        flag_values=flag_values,
    )
    flags.DEFINE_integer(
        "steps_per_execution",
        1,
        "Train steps per tf.function call.",
        flag_values=flag_values,
    )


def runtime_config_from_flags(flag_values=flags.FLAGS):
    """The `RuntimeConfig` of the parsed runtime flags."""
    return config_lib.RuntimeConfig(
        strategy=flag_values.strategy,
        tpu=flag_values.tpu,
        num_cpu_devices=flag_values.num_cpu_devices,
        mixed_precision=flag_values.mixed_precision,
        jit_compile=flag_values.jit_compile,
        steps_per_execution=flag_values.steps_per_execution,
    )
