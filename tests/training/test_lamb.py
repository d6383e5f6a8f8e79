import keras
import numpy as np
import pytest

from tupe_tf.training.config import OptimizerConfig
from tupe_tf.training.lamb import Lamb
from tupe_tf.training.optimization import create_optimizer
from tupe_tf.utils.errors import UserError

LEARNING_RATE, WEIGHT_DECAY, CLIPNORM = 0.1, 0.3, 1.0
BETA_1, BETA_2, EPSILON = 0.9, 0.999, 1e-6
NUM_TRAIN_STEPS = 10


def _dense_model():
    inputs = keras.Input((3,))
    outputs = keras.layers.Dense(2, name="dense")(inputs)
    model = keras.Model(inputs, outputs)
    model.get_layer("dense").set_weights(
        [
            np.array([[0.5, -1.0], [2.0, 0.25], [-0.75, 1.5]], np.float32),
            np.array([0.2, -0.4], np.float32),
        ]
    )
    return model


def reference_lamb(weights, gradients, excluded):
    """NumPy LAMB (You et al. 2020, Algorithm 2) with the global-norm clip
    and the warm-up/linear-decay schedule (no warm-up) of
    `create_optimizer`; `excluded` names the variables with neither weight
    decay nor trust ratio."""
    weights = {name: w.astype(np.float64) for name, w in weights.items()}
    m = {name: np.zeros_like(w) for name, w in weights.items()}
    v = {name: np.zeros_like(w) for name, w in weights.items()}
    for step, grads in enumerate(gradients):
        t = step + 1
        lr = LEARNING_RATE * (NUM_TRAIN_STEPS - step) / NUM_TRAIN_STEPS
        norm = np.sqrt(
            sum(np.sum(g.astype(np.float64) ** 2) for g in grads.values())
        )
        for name, g in grads.items():
            g = g * CLIPNORM / max(norm, CLIPNORM)
            m[name] = BETA_1 * m[name] + (1 - BETA_1) * g
            v[name] = BETA_2 * v[name] + (1 - BETA_2) * g**2
            m_hat = m[name] / (1 - BETA_1**t)
            v_hat = v[name] / (1 - BETA_2**t)
            update = m_hat / (np.sqrt(v_hat) + EPSILON)
            if name not in excluded:
                update = update + WEIGHT_DECAY * weights[name]
                update *= np.linalg.norm(weights[name]) / np.linalg.norm(update)
            weights[name] = weights[name] - lr * update
    return weights


GRADIENTS = [
    {
        "dense/kernel": np.array([[0.3, -0.2], [0.1, 0.8], [-0.5, 0.4]]),
        "dense/bias": np.array([0.6, -0.9]),
    },
    {
        "dense/kernel": np.array([[-0.1, 0.05], [0.2, -0.3], [0.7, 0.1]]),
        "dense/bias": np.array([-0.2, 0.4]),
    },
]


def test_two_lamb_updates_match_numpy_reference():
    model = _dense_model()
    optimizer = create_optimizer(
        model,
        num_train_steps=NUM_TRAIN_STEPS,
        learning_rate=LEARNING_RATE,
        warmup_steps=0,
        weight_decay=WEIGHT_DECAY,
        beta_1=BETA_1,
        beta_2=BETA_2,
        epsilon=EPSILON,
        clipnorm=CLIPNORM,
        algorithm="lamb",
    )
    assert isinstance(optimizer, Lamb)
    variables = {v.path: v for v in model.trainable_variables}
    before = {name: np.array(v.numpy()) for name, v in variables.items()}
    for grads in GRADIENTS:
        optimizer.apply(
            [grads[name].astype(np.float32) for name in variables],
            list(variables.values()),
        )
    expected = reference_lamb(before, GRADIENTS, excluded={"dense/bias"})
    for name, variable in variables.items():
        np.testing.assert_allclose(
            variable.numpy(), expected[name], rtol=1e-5, atol=2e-6
        )
    # The trust ratio and the decay change the kernel's step: the same
    # reference with the kernel excluded (plain Adam) lands elsewhere.
    adam = reference_lamb(before, GRADIENTS, excluded=set(variables))
    assert np.abs(adam["dense/kernel"] - expected["dense/kernel"]).max() > 1e-3


def test_excluded_variable_gets_no_decay_and_no_trust_ratio():
    variable = keras.Variable(np.full((4,), 10.0, np.float32), name="bias")
    optimizer = Lamb(learning_rate=0.01, weight_decay=0.5, epsilon=0.0)
    optimizer.exclude_from_weight_decay(var_list=[variable])
    optimizer.apply([np.full((4,), 2.0, np.float32)], [variable])
    # Adam's first step moves each element by the learning rate.
    np.testing.assert_allclose(variable.numpy(), 10.0 - 0.01, rtol=1e-6)


def test_lamb_round_trips_through_config():
    optimizer = Lamb(learning_rate=0.02, beta_1=0.8, epsilon=1e-5)
    restored = Lamb.from_config(optimizer.get_config())
    assert (restored.beta_1, restored.epsilon) == (0.8, 1e-5)
    assert float(restored.learning_rate) == pytest.approx(0.02)


def test_optimizer_setting_defaults_to_adamw_and_refuses_others():
    assert OptimizerConfig().algorithm == "adamw"
    with pytest.raises(UserError, match="--optimizer"):
        OptimizerConfig(algorithm="sgd").validate()
