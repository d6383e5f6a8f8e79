import keras
import numpy as np
import pytest

from tupe_tf.training.optimization import WarmupLinearDecay
from tupe_tf.training.optimization import create_optimizer
from tupe_tf.training.optimization import current_learning_rate
from tupe_tf.training.optimization import weight_decay_exclusions


def test_schedule_warms_up_linearly_then_decays_to_zero():
    schedule = WarmupLinearDecay(1e-4, warmup_steps=10, total_steps=110)
    values = [float(schedule(step)) for step in (0, 5, 10, 60, 110, 200)]
    np.testing.assert_allclose(
        values, [0.0, 5e-5, 1e-4, 5e-5, 0.0, 0.0], atol=1e-12
    )


def test_schedule_without_warmup_starts_at_peak():
    schedule = WarmupLinearDecay(2e-5, warmup_steps=0, total_steps=4)
    np.testing.assert_allclose(
        [float(schedule(s)) for s in range(5)],
        [2e-5, 1.5e-5, 1e-5, 5e-6, 0.0],
        atol=1e-12,
    )


def test_schedule_round_trips_through_config():
    schedule = WarmupLinearDecay(3e-5, 6, 100)
    restored = keras.optimizers.schedules.deserialize(
        keras.optimizers.schedules.serialize(schedule)
    )
    assert float(restored(50)) == pytest.approx(float(schedule(50)))


def test_schedule_refuses_warmup_longer_than_training():
    with pytest.raises(ValueError, match="warmup_steps"):
        WarmupLinearDecay(1e-4, warmup_steps=20, total_steps=10)


def _tiny_model():
    inputs = keras.Input((4,))
    x = keras.layers.Dense(8, name="dense")(inputs)
    x = keras.layers.LayerNormalization(name="norm")(x)
    x = keras.layers.Embedding(10, 8, name="embedding")(
        keras.ops.cast(x[:, :1] * 0, "int32")
    )
    return keras.Model(inputs, x)


def test_layer_norm_and_biases_are_excluded_kernels_and_embeddings_are_not():
    model = _tiny_model()
    excluded = {v.path for v in weight_decay_exclusions(model)}
    assert excluded == {"dense/bias", "norm/gamma", "norm/beta"}


def test_adamw_decays_kernels_but_not_layer_norm_or_bias():
    model = _tiny_model()
    optimizer = create_optimizer(
        model,
        num_train_steps=10,
        learning_rate=0.1,
        warmup_steps=0,
        weight_decay=0.5,
    )
    before = {v.path: np.array(v.numpy()) for v in model.trainable_variables}
    # Zero gradients: any change is weight decay alone.
    optimizer.apply(
        [keras.ops.zeros_like(v) for v in model.trainable_variables],
        model.trainable_variables,
    )
    after = {v.path: np.array(v.numpy()) for v in model.trainable_variables}
    for path in ("dense/bias", "norm/gamma", "norm/beta"):
        np.testing.assert_array_equal(after[path], before[path])
    # AdamW: w <- w - lr * wd * w at lr = 0.1 (step 0 of the schedule).
    for path in ("dense/kernel", "embedding/embeddings"):
        np.testing.assert_allclose(
            after[path], before[path] * (1 - 0.1 * 0.5), rtol=1e-5
        )


def test_optimizer_uses_paper_defaults():
    model = _tiny_model()
    optimizer = create_optimizer(
        model, num_train_steps=100, learning_rate=1e-4, warmup_steps=10
    )
    assert optimizer.beta_1 == 0.9
    assert optimizer.beta_2 == 0.999
    assert optimizer.epsilon == 1e-6
    assert optimizer.weight_decay == 0.01
    assert optimizer.global_clipnorm == 1.0
    assert current_learning_rate(optimizer) == 0.0
