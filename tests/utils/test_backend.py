import keras
import numpy as np
import pytest

from tupe_tf.export import export_preset
from tupe_tf.training.distribution import create_strategy
from tupe_tf.utils.backend import assign_seeded_weights
from tupe_tf.utils.backend import require_tensorflow
from tupe_tf.utils.errors import UserError


@pytest.fixture
def on_jax(monkeypatch):
    monkeypatch.setattr(keras.backend, "backend", lambda: "jax")


def test_nothing_is_refused_on_tensorflow(monkeypatch):
    monkeypatch.setattr(keras.backend, "backend", lambda: "tensorflow")
    require_tensorflow("SavedModel export")


def test_other_backends_are_refused_with_what_to_do(on_jax):
    with pytest.raises(UserError) as error:
        require_tensorflow("SavedModel export")
    message = str(error.value)
    assert message.startswith("SavedModel export needs the TensorFlow")
    assert "'jax'" in message and "KERAS_BACKEND=tensorflow" in message


def test_export_refuses_before_reading_the_preset(on_jax, tmp_path):
    with pytest.raises(UserError, match="SavedModel export needs"):
        export_preset(str(tmp_path / "missing"), str(tmp_path / "out"), "x")


def test_strategies_are_refused_but_default(on_jax):
    with pytest.raises(UserError, match="--strategy=mirrored needs"):
        create_strategy("mirrored")
    assert create_strategy("default").num_replicas_in_sync == 1


def test_seeded_weights_are_numpys_draws_in_weight_order():
    dense = keras.layers.Dense(3)
    norm = keras.layers.LayerNormalization()
    model = keras.Sequential([keras.Input((2,)), dense, norm])
    assign_seeded_weights(model, seed=7, stddev=0.5)
    rng = np.random.default_rng(7)
    expected = [rng.normal(0.0, 0.5, shape) for shape in [(2, 3), (3,), (3,)]]
    expected.append(rng.normal(0.0, 0.5, (3,)))
    expected[2] += 1.0  # The layer norm's gamma.
    assert [v.path.split("/")[-1] for v in model.weights] == [
        "kernel",
        "bias",
        "gamma",
        "beta",
    ]
    for variable, value in zip(model.weights, expected):
        np.testing.assert_allclose(variable.numpy(), value, rtol=1e-6)


def test_layer_norm_scales_can_have_their_own_spread():
    norm = keras.layers.LayerNormalization()
    norm.build((None, 4))
    assign_seeded_weights(norm, seed=3, stddev=0.5, gamma_stddev=0.1)
    rng = np.random.default_rng(3)
    np.testing.assert_allclose(
        norm.gamma.numpy(), 1.0 + rng.normal(0.0, 0.1, (4,)), rtol=1e-6
    )
    np.testing.assert_allclose(
        norm.beta.numpy(), rng.normal(0.0, 0.5, (4,)), rtol=1e-6
    )
