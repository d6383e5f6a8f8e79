import ast
import pathlib

import keras
import keras_hub
import numpy as np
import pytest

from tupe_tf.layers import keras_internals

ROOT = pathlib.Path(__file__).resolve().parents[2]
SOURCES = [
    *(ROOT / "tupe_tf").rglob("*.py"),
    *(ROOT / "scripts").rglob("*.py"),
]
INTERNALS = {"keras_internals.py", "keras_hub_internals.py"}


def _private(names):
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def _library_private_names():
    """Private member names of the Keras and keras-hub objects tupe-tf
    builds on: classes it extends or calls, and built instances (whose
    private attributes `build` and `compile` set)."""
    x = np.zeros((1, 3, 4), "float32")
    attention = keras.layers.MultiHeadAttention(2, 2, dropout=0.1)
    attention(x, x)
    encoder = keras_hub.layers.TransformerEncoder(8, 2)
    encoder(x)
    head = keras_hub.layers.MaskedLMHead(vocabulary_size=5, activation="gelu")
    head(x, mask_positions=np.zeros((1, 2), "int32"))
    inputs = keras.Input((4,))
    model = keras.Model(inputs, keras.layers.Dense(1)(inputs))
    model.compile(optimizer="adamw", loss="mse")
    names = set()
    for thing in (
        attention,
        encoder,
        head,
        model,
        model.optimizer,
        keras_hub.tokenizers.Tokenizer(),
        keras.callbacks.Callback,
        keras.optimizers.schedules.LearningRateSchedule,
        keras_hub.models.Backbone,
        keras_hub.models.Task,
        keras_hub.models.Preprocessor,
    ):
        names |= _private(dir(thing))
    return names


def _defined_in(tree):
    """Private names a module defines itself (methods, `self._x = ...`)."""
    defined = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defined.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = getattr(node, "targets", None) or [node.target]
            for target in targets:
                for sub in ast.walk(target):
                    if isinstance(sub, ast.Attribute):
                        defined.add(sub.attr)
    return _private(defined)


def _uses(sources=SOURCES):
    """`(file, what)` for every use of a library internal outside the two
    internals modules: a `keras.src` import, `tf.__internal__`, and a
    library object's private member that the file does not define."""
    private = _library_private_names()
    uses = set()
    for path in sources:
        tree = ast.parse(path.read_text())
        own = _defined_in(tree)
        for node in ast.walk(tree):
            module = getattr(node, "module", None) or ""
            imports = isinstance(node, (ast.Import, ast.ImportFrom))
            names = [a.name for a in node.names] if imports else []
            if module.startswith(("keras.src", "keras_hub.src")) or any(
                n.startswith(("keras.src", "keras_hub.src")) for n in names
            ):
                uses.add((path.name, module or names[0]))
            attr = getattr(node, "attr", None)
            if attr == "__internal__" or (attr in private and attr not in own):
                uses.add((path.name, attr))
    return uses


def test_library_internals_are_used_in_the_internals_modules_only():
    outside = {use for use in _uses() if use[0] not in INTERNALS}
    assert outside == set()


def test_the_attention_dropout_is_the_attentions_own():
    attention = keras.layers.MultiHeadAttention(2, 4, dropout=0.3, seed=5)
    x = np.ones((1, 3, 8), "float32")
    attention(x, x)
    dropout = keras_internals.attention_dropout_layer(attention)
    assert isinstance(dropout, keras.layers.Dropout)
    assert dropout.rate == attention.dropout == 0.3
    # Its seed generator is one of the attention's variables.
    state = dropout.seed_generator.state
    assert any(v is state for v in attention.non_trainable_variables)


def test_the_optimizer_internals_behave_as_used():
    kernel = keras.Variable(np.ones((2, 2), "float32"), name="kernel")
    bias = keras.Variable(np.zeros((2,), "float32"), name="bias")
    optimizer = keras.optimizers.AdamW(weight_decay=0.1)
    optimizer.exclude_from_weight_decay(var_names=["bias"])
    optimizer.build([kernel, bias])
    assert keras_internals.optimizer_variable_index(optimizer, kernel) == 0
    assert keras_internals.optimizer_variable_index(optimizer, bias) == 1
    assert keras_internals.uses_weight_decay(optimizer, kernel)
    assert not keras_internals.uses_weight_decay(optimizer, bias)


@pytest.mark.parametrize(
    "source, expected",
    [
        ("from keras.src.losses import loss\n", "keras.src.losses"),
        ("x = tf.__internal__.tracking.AutoTrackable()\n", "__internal__"),
        ("x = model._flatten_layers()\n", "_flatten_layers"),
        ("x = layer._query_dense(y)\n", "_query_dense"),
    ],
)
def test_the_check_sees_each_kind_of_use(tmp_path, source, expected):
    path = tmp_path / "user.py"
    path.write_text(source)
    assert _uses([path]) == {("user.py", expected)}
