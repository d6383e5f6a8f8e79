"""Loads tupe-tf exports in a fresh process and checks them (see
test_loading_in_fresh_process.py, which runs this file as a script).

Usage: python fresh_process_checks.py {encoder|keras3|tf_keras} REFERENCE.npz...

`encoder` checks the hub encoder alone (`keras3` does, then the
preprocessor and serving exports).

Each REFERENCE.npz holds the export paths and the in-memory results of one
model (one process checks several: a start-up costs more than the checks).
Prints `REFERENCE <path>` before each model's checks and one `OK <check>`
line per check that passed; exits non-zero (with the assertion) on the first
mismatch.

Models that share one preprocessor export load it once per loader: a
preprocessor's many functions make its load the slowest of the three.
"""

import functools
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
if sys.argv[1] == "tf_keras":
    # tensorflow_hub.KerasLayer is a tf-keras (Keras 2) layer.
    os.environ["TF_USE_LEGACY_KERAS"] = "1"

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_text  # noqa: E402,F401  (registers the TF-Text ops)

ATOL = 1e-5
INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")


def check_encoder_outputs(outputs, ref, what):
    np.testing.assert_allclose(
        outputs["pooled_output"], ref["pooled_output"], atol=ATOL, err_msg=what
    )
    np.testing.assert_allclose(
        outputs["default"], ref["pooled_output"], atol=ATOL, err_msg=what
    )
    np.testing.assert_allclose(
        outputs["sequence_output"],
        ref["sequence_output"],
        atol=ATOL,
        err_msg=what,
    )
    encoder_outputs = outputs["encoder_outputs"]
    assert len(encoder_outputs) == int(ref["num_layers"]), what
    for index, tensor in enumerate(encoder_outputs):
        np.testing.assert_allclose(
            tensor, ref[f"encoder_outputs_{index}"], atol=ATOL, err_msg=what
        )
    print("OK", what, flush=True)


def check_gradients(tape, loss, variables, expected_count, what):
    assert len(variables) == expected_count, (what, len(variables))
    gradients = tape.gradient(loss, variables)
    missing = [
        v.name
        for v, g in zip(variables, gradients)
        if g is None or not np.any(np.asarray(tf.convert_to_tensor(g)))
    ]
    assert not missing, (what, "no gradient for", missing)
    print("OK", what, flush=True)


def loss_of(outputs):
    # Every output, so every variable (pooler included) gets a gradient.
    return tf.reduce_sum(outputs["pooled_output"]) + tf.reduce_sum(
        tf.square(outputs["sequence_output"])
    )


def check_trainable_model(model, inputs, ref, variables, what, gradients_what):
    """Checks `model`'s inference outputs against `ref`, then that a
    training-mode loss reaches each of `variables()`."""
    check_encoder_outputs(model(inputs, training=False), ref, what)
    with tf.GradientTape() as tape:
        loss = loss_of(model(inputs, training=True))
    check_gradients(
        tape, loss, variables(), int(ref["num_trainable"]), gradients_what
    )


@functools.cache
def load_once(loader, path):
    """`loader(path)` (`tupe_tf.hub.load`, `tf.saved_model.load`,
    `tensorflow_hub.load` or `tensorflow_hub.KerasLayer`), once per path."""
    return loader(path)


def encoder_checks(ref):
    """The hub encoder on token ids, loaded three ways (Keras 3)."""
    import keras

    import tupe_tf.hub

    inputs = {name: ref[name] for name in INPUT_NAMES}
    # 1. tf.saved_model.load.
    encoder = tf.saved_model.load(str(ref["encoder"]))
    check_encoder_outputs(encoder(inputs), ref, "tf.saved_model.load encoder")
    check_encoder_outputs(
        encoder(inputs, training=False),
        ref,
        "tf.saved_model.load encoder, training=False",
    )

    # 2. keras.layers.TFSMLayer inside a Keras 3 functional model.
    symbolic = {
        name: keras.Input(shape=(None,), dtype="int32", name=name)
        for name in INPUT_NAMES
    }
    layer = keras.layers.TFSMLayer(str(ref["encoder"]), call_endpoint="serve")
    model = keras.Model(symbolic, layer(symbolic))
    check_encoder_outputs(model(inputs), ref, "TFSMLayer in a Keras 3 model")

    # 3. tupe_tf.hub.load, trainable, in a Keras 3 model.
    layer = tupe_tf.hub.load(str(ref["encoder"]), trainable=True)
    model = keras.Model(symbolic, layer(symbolic))
    check_trainable_model(
        model,
        inputs,
        ref,
        lambda: [v.value for v in model.trainable_variables],
        "tupe_tf.hub.load encoder in a Keras 3 model",
        "Keras 3 gradients reach every encoder variable",
    )
    return encoder


def keras3_checks(ref):
    import tupe_tf.hub

    encoder = encoder_checks(ref)

    # 4. Preprocessor + encoder on raw text, as the in-memory pipeline.
    preprocessor = load_once(tupe_tf.hub.load, str(ref["preprocessor"]))
    encoder_layer = tupe_tf.hub.load(str(ref["encoder"]))
    packed = preprocessor(tf.constant(ref["texts_a"]))
    for name in INPUT_NAMES:
        np.testing.assert_array_equal(packed[name], ref[f"single_{name}"])
    np.testing.assert_allclose(
        encoder_layer(packed)["pooled_output"],
        ref["single_pooled_output"],
        atol=ATOL,
    )
    print("OK preprocessor + encoder on raw text (Keras 3)", flush=True)
    loaded = load_once(tf.saved_model.load, str(ref["preprocessor"]))
    pair = loaded.bert_pack_inputs(
        [
            loaded.tokenize(tf.constant(ref["texts_a"])),
            loaded.tokenize(tf.constant(ref["texts_b"])),
        ],
        seq_length=int(ref["seq_length"]),
    )
    for name in INPUT_NAMES:
        np.testing.assert_array_equal(pair[name], ref[name])
    check_encoder_outputs(
        encoder(pair), ref, "tokenize + bert_pack_inputs + encoder on pairs"
    )

    # 5. The serving export through tupe_tf.hub.load.
    serving = tupe_tf.hub.load(str(ref["serving"]))
    outputs = serving(
        {
            "premise": tf.constant(ref["texts_a"]),
            "hypothesis": tf.constant(ref["texts_b"]),
        }
    )
    np.testing.assert_allclose(outputs["logits"], ref["logits"], atol=ATOL)
    print("OK serving export through tupe_tf.hub.load", flush=True)


def tf_keras_checks(ref):
    import tensorflow_hub as hub
    import tf_keras

    inputs = {name: ref[name] for name in INPUT_NAMES}
    symbolic = {
        name: tf_keras.Input(shape=(None,), dtype=tf.int32, name=name)
        for name in INPUT_NAMES
    }
    layer = hub.KerasLayer(str(ref["encoder"]), trainable=True)
    model = tf_keras.Model(symbolic, layer(symbolic))
    check_trainable_model(
        model,
        inputs,
        ref,
        lambda: model.trainable_variables,
        "hub.KerasLayer(trainable=True) in a tf-keras model",
        "tf-keras gradients reach every encoder variable",
    )

    # Raw text through both hub.KerasLayers in one tf-keras model.
    text = tf_keras.Input(shape=(), dtype=tf.string)
    preprocessor = load_once(hub.KerasLayer, str(ref["preprocessor"]))
    encoder = hub.KerasLayer(str(ref["encoder"]))
    pipeline = tf_keras.Model(text, encoder(preprocessor(text)))
    outputs = pipeline(tf.constant(ref["texts_a"]))
    np.testing.assert_allclose(
        outputs["pooled_output"], ref["single_pooled_output"], atol=ATOL
    )
    print("OK preprocessor + encoder on raw text (tf-keras)", flush=True)

    # Pairs the TF Hub way: hub.KerasLayer on .tokenize and .bert_pack_inputs.
    loaded = load_once(hub.load, str(ref["preprocessor"]))
    tokenize = hub.KerasLayer(loaded.tokenize)
    pack = hub.KerasLayer(
        loaded.bert_pack_inputs,
        arguments={"seq_length": int(ref["seq_length"])},
    )
    first = tf_keras.Input(shape=(), dtype=tf.string)
    second = tf_keras.Input(shape=(), dtype=tf.string)
    pair_model = tf_keras.Model(
        [first, second], encoder(pack([tokenize(first), tokenize(second)]))
    )
    check_encoder_outputs(
        pair_model([tf.constant(ref["texts_a"]), tf.constant(ref["texts_b"])]),
        ref,
        "tokenize + bert_pack_inputs + encoder on pairs (tf-keras)",
    )


if __name__ == "__main__":
    checks = {
        "encoder": encoder_checks,
        "keras3": keras3_checks,
        "tf_keras": tf_keras_checks,
    }[sys.argv[1]]
    for path in sys.argv[2:]:
        print(f"REFERENCE {path}", flush=True)
        checks(dict(np.load(path, allow_pickle=False)))
