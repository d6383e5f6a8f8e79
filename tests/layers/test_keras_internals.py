import ast
import pathlib

import keras
import numpy as np
import tensorflow as tf

from tupe_tf.layers import keras_internals

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "tupe_tf"
PRIVATE_MEMBERS = {"_flatten_layers", "_compute_loss", "_loss_tracker"}


def test_every_keras_internal_is_used_in_this_module_only():
    users = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            module = getattr(node, "module", None) or ""
            names = [a.name for a in getattr(node, "names", [])]
            if (
                module.startswith("keras.src")
                or any(n.startswith("keras.src") for n in names)
                or getattr(node, "attr", None) in PRIVATE_MEMBERS
            ):
                users.add(path.name)
    assert users == {"keras_internals.py"}


def _compiled_model():
    inputs = keras.Input((3,))
    hidden = keras.layers.Dense(4, name="hidden")(inputs)
    norm = keras.layers.LayerNormalization(name="norm")(hidden)
    model = keras.Model(inputs, keras.layers.Dense(1, name="out")(norm))
    model.compile(optimizer="sgd", loss="mse")
    return model


def test_the_internals_behave_as_used():
    model = _compiled_model()
    names = [layer.name for layer in keras_internals.flatten_layers(model)]
    assert names[0] == model.name
    assert {"hidden", "norm", "out"} <= set(names)
    inner = keras_internals.flatten_layers(model, include_self=False)
    assert model.name not in [layer.name for layer in inner]

    x = np.arange(6, dtype="float32").reshape(2, 3)
    y = np.ones((2, 1), "float32")
    y_pred = model(x)
    loss = keras_internals.compute_loss(model, x, y, y_pred, None)
    expected = np.mean((keras.ops.convert_to_numpy(y_pred) - y) ** 2)
    np.testing.assert_allclose(float(loss), expected, rtol=1e-6)
    # One replica: nothing to unscale.
    assert float(keras_internals.unscale_loss_for_distribution(loss)) == float(
        loss
    )
    tracker = keras_internals.loss_tracker(model)
    tracker.update_state(tf.constant(2.0))
    assert float(tracker.result()) == 2.0
    assert tracker.name == "loss"
