"""AdamW (or LAMB) with linear warm-up and linear decay, as in TUPE
Table 2."""

import keras

from tupe_tf.training.lamb import Lamb

# The names `keras.layers.LayerNormalization` gives its scale and offset.
LAYER_NORM_VARIABLES = ("gamma", "beta")

OPTIMIZER_CLASSES = {"adamw": keras.optimizers.AdamW, "lamb": Lamb}


@keras.saving.register_keras_serializable(package="tupe_tf")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up from 0 to `peak_learning_rate`, then linear decay to 0.

    `lr(step) = peak * step / warmup_steps` for `step < warmup_steps`, then
    `peak * (total_steps - step) / (total_steps - warmup_steps)`, and 0 from
    `total_steps` on. `step` is the optimizer's iteration count, so the
    schedule resumes exactly when the optimizer state is restored.

    Args:
        peak_learning_rate: the learning rate at the end of warm-up.
        warmup_steps: warm-up length in steps (0 starts at the peak).
        total_steps: step at which the learning rate reaches zero.

    Example:

    >>> schedule = WarmupLinearDecay(1e-4, warmup_steps=10, total_steps=110)
    >>> float(schedule(5)), float(schedule(10)), float(schedule(60))
    (5e-05, 0.0001, 5e-05)
    """

    def __init__(self, peak_learning_rate, warmup_steps, total_steps):
        if total_steps <= 0:
            raise ValueError(
                f"total_steps must be positive, got {total_steps}."
            )
        if not 0 <= warmup_steps <= total_steps:
            raise ValueError(
                f"warmup_steps={warmup_steps} must be in [0, total_steps="
                f"{total_steps}]."
            )
        self.peak_learning_rate = float(peak_learning_rate)
        self.warmup_steps = int(warmup_steps)
        self.total_steps = int(total_steps)

    def __call__(self, step):
        step = keras.ops.cast(step, "float32")
        peak = self.peak_learning_rate
        warmup = float(self.warmup_steps)
        warmup_lr = peak * step / max(warmup, 1.0)
        decay_span = max(float(self.total_steps) - warmup, 1.0)
        decay_lr = peak * (float(self.total_steps) - step) / decay_span
        lr = keras.ops.where(step < warmup, warmup_lr, decay_lr)
        return keras.ops.clip(lr, 0.0, peak)

    def get_config(self):
        return {
            "peak_learning_rate": self.peak_learning_rate,
            "warmup_steps": self.warmup_steps,
            "total_steps": self.total_steps,
        }


def weight_decay_exclusions(model):
    """Variables that must not be weight-decayed: LayerNorm and biases.

    LayerNorm parameters are the variables Keras' `LayerNormalization`
    names `gamma` and `beta` (its variable names, not the layer's: a
    position LayerNorm with any layer name is covered; no other layer of
    these models names a variable so); biases are the 1-D variables named
    `bias`. Position tables and embeddings keep weight decay.

    Args:
        model: a built Keras model.

    Returns:
        A list of variables.
    """
    excluded = {}
    for variable in model.weights:
        if variable.name in LAYER_NORM_VARIABLES:
            excluded[id(variable)] = variable
    for variable in model.trainable_variables:
        if variable.name == "bias" and len(variable.shape) == 1:
            excluded[id(variable)] = variable
    return list(excluded.values())


def create_optimizer(
    model,
    num_train_steps,
    learning_rate=1e-4,
    warmup_steps=0,
    weight_decay=0.01,
    beta_1=0.9,
    beta_2=0.999,
    epsilon=1e-6,
    clipnorm=1.0,
    algorithm="adamw",
):
    """AdamW or LAMB with the warm-up/linear-decay schedule and exclusions.

    Args:
        model: the built model whose variables will be trained (used to
            find LayerNorm parameters and biases).
        num_train_steps: total optimizer steps (the decay reaches 0 there).
        learning_rate: peak learning rate.
        warmup_steps: linear warm-up steps.
        weight_decay: decoupled weight decay for all other variables.
        beta_1, beta_2, epsilon: Adam hyper-parameters.
        clipnorm: global gradient-norm clip, or `None`.
        algorithm: `"adamw"` (`keras.optimizers.AdamW`) or `"lamb"`
            (`tupe_tf.training.lamb.Lamb`).

    Returns:
        The optimizer.

    Example:

    >>> optimizer = create_optimizer(model, num_train_steps=1000,
    ...                              learning_rate=1e-4, warmup_steps=10)
    >>> model.compile(optimizer=optimizer, ...)
    """
    schedule = WarmupLinearDecay(learning_rate, warmup_steps, num_train_steps)
    optimizer = OPTIMIZER_CLASSES[algorithm](
        learning_rate=schedule,
        weight_decay=weight_decay,
        beta_1=beta_1,
        beta_2=beta_2,
        epsilon=epsilon,
        global_clipnorm=clipnorm,
    )
    optimizer.exclude_from_weight_decay(var_list=weight_decay_exclusions(model))
    return optimizer


def optimizer_from_config(model, config, num_train_steps, learning_rate):
    """`create_optimizer` with the settings of an `OptimizerConfig`.

    Args:
        model: the built model whose variables will be trained.
        config: a `tupe_tf.training.OptimizerConfig`.
        num_train_steps: total optimizer steps (warm-up from `config`).
        learning_rate: the peak learning rate (pre-training resolves the
            config's by model size; fine-tuning sweeps its own).

    Returns:
        A `keras.optimizers.AdamW` or `tupe_tf.training.lamb.Lamb`.
    """
    return create_optimizer(
        model,
        num_train_steps=num_train_steps,
        learning_rate=learning_rate,
        warmup_steps=config.resolve_warmup_steps(num_train_steps),
        weight_decay=config.weight_decay,
        beta_1=config.beta_1,
        beta_2=config.beta_2,
        epsilon=config.epsilon,
        clipnorm=config.clipnorm,
        algorithm=config.algorithm,
    )


def current_learning_rate(optimizer):
    """The learning rate the optimizer uses at its current iteration."""
    inner = getattr(optimizer, "inner_optimizer", optimizer)
    lr = inner.learning_rate
    if callable(lr):
        lr = lr(inner.iterations)
    return float(keras.ops.convert_to_numpy(lr))
