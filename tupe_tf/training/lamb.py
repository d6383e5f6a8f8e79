"""LAMB: Adam moments with decoupled weight decay and a layer-wise trust
ratio, as in You et al. (2020), "Large Batch Optimization for Deep
Learning: Training BERT in 76 minutes"."""

import keras

from tupe_tf.layers import keras_internals


@keras.saving.register_keras_serializable(package="tupe_tf")
class Lamb(keras.optimizers.Optimizer):
    """LAMB with the weight-decay exclusions of AdamW.

    For each variable `w` with gradient `g` at update `t`:

    ```
    m = beta_1 * m + (1 - beta_1) * g
    v = beta_2 * v + (1 - beta_2) * g**2
    u = (m / (1 - beta_1**t)) / (sqrt(v / (1 - beta_2**t)) + epsilon)
    u = u + weight_decay * w           # variables not excluded
    r = ||w|| / ||u||  (1 when either norm is 0; variables not excluded)
    w = w - learning_rate * r * u
    ```

    The weight decay enters the update before the trust ratio, as in the
    paper's algorithm, unlike `keras.optimizers.Lamb`, which decays outside
    the trust ratio and applies the ratio to every variable. A variable
    excluded with `exclude_from_weight_decay` (LayerNorm, biases) gets
    neither decay nor trust ratio: its step is Adam's, as in the paper's
    BERT set-up.

    Args:
        learning_rate: a float or a
            `keras.optimizers.schedules.LearningRateSchedule`.
        beta_1: decay rate of the first-moment estimate.
        beta_2: decay rate of the second-moment estimate.
        epsilon: added to the square root of the second moment.
        weight_decay: decoupled weight decay, or `None`.
        **kwargs: the other arguments of `keras.optimizers.Optimizer`
            (`global_clipnorm`, `gradient_accumulation_steps`, `name`...).

    Example:

    >>> optimizer = Lamb(learning_rate=1e-3, weight_decay=0.01,
    ...                  global_clipnorm=1.0)
    >>> optimizer.exclude_from_weight_decay(var_names=["bias"])
    >>> model.compile(optimizer=optimizer, loss="mse")
    """

    def __init__(
        self,
        learning_rate=0.001,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-6,
        weight_decay=None,
        **kwargs,
    ):
        super().__init__(
            learning_rate=learning_rate, weight_decay=weight_decay, **kwargs
        )
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._momentums, self._velocities = self.add_optimizer_variables(
            var_list, ["momentum", "velocity"]
        )

    def _apply_weight_decay(self, variables):
        # The decay is part of the update (`update_step`), inside the trust
        # ratio, not a separate shrink of the variable. This overrides the
        # (private) step of `Optimizer.apply` that would shrink it: see
        # tupe_tf/layers/keras_internals.py for why there is no public one.
        return

    def update_step(self, gradient, variable, learning_rate):
        dtype = variable.dtype
        lr = keras.ops.cast(learning_rate, dtype)
        gradient = keras.ops.cast(gradient, dtype)
        step = keras.ops.cast(self.iterations + 1, dtype)
        index = keras_internals.optimizer_variable_index(self, variable)
        m, v = self._momentums[index], self._velocities[index]
        self.assign_add(m, (gradient - m) * (1 - self.beta_1))
        self.assign_add(v, (keras.ops.square(gradient) - v) * (1 - self.beta_2))
        m_hat = m / (1 - keras.ops.power(self.beta_1, step))
        v_hat = v / (1 - keras.ops.power(self.beta_2, step))
        update = m_hat / (keras.ops.sqrt(v_hat) + self.epsilon)
        if keras_internals.uses_weight_decay(self, variable):
            if self.weight_decay:
                decay = keras.ops.cast(self.weight_decay, dtype)
                update = update + decay * variable
            update = trust_ratio(variable, update) * update
        self.assign_sub(variable, lr * update)

    def get_config(self):
        config = super().get_config()
        config.update(
            beta_1=self.beta_1, beta_2=self.beta_2, epsilon=self.epsilon
        )
        return config


def trust_ratio(variable, update):
    """`||variable|| / ||update||`, or 1 when either norm is zero."""
    w_norm = keras.ops.sqrt(keras.ops.sum(keras.ops.square(variable)))
    u_norm = keras.ops.sqrt(keras.ops.sum(keras.ops.square(update)))
    positive = keras.ops.logical_and(w_norm > 0, u_norm > 0)
    return keras.ops.where(
        positive, w_norm / keras.ops.maximum(u_norm, 1e-30), 1.0
    )
