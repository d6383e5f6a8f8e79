import ast
import pathlib

import keras
import keras_hub
import numpy as np
import tensorflow as tf

from tests import numpy_reference as ref
from tests.test_case import assert_allclose
from tupe_tf.layers import keras_hub_internals

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "tupe_tf"


def test_every_keras_hub_src_import_is_in_this_module():
    importers = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (
                node.module or ""
            ).startswith("keras_hub.src"):
                importers.append(path.name)
    assert set(importers) == {"keras_hub_internals.py"}


def test_the_imported_helpers_behave_as_used():
    x = np.linspace(-3, 3, 13).astype("float32")
    assert_allclose(
        keras.ops.convert_to_numpy(keras_hub_internals.gelu_approximate(x)),
        ref.gelu_tanh(x.astype("float64")),
        atol=1e-5,
    )
    words = keras_hub_internals.pretokenize(
        tf.constant(["Hello, World!"]), lowercase=True
    )
    assert words.to_list() == [[b"hello", b",", b"world", b"!"]]
    assert keras_hub_internals.MAX_BYTES_PER_WORD > 0


def test_the_encoder_sublayers_are_keras_hubs_by_their_names():
    encoder = keras_hub.layers.TransformerEncoder(
        intermediate_dim=8, num_heads=2
    )
    encoder(np.zeros((1, 3, 4), "float32"))
    layers = keras_hub_internals.transformer_encoder_sublayers(encoder)
    assert [layer.name for layer in layers] == list(
        keras_hub_internals.ENCODER_SUBLAYER_NAMES
    )
    assert type(layers.self_attention_layer) is keras.layers.MultiHeadAttention
    assert layers.self_attention_layer is getattr(
        encoder, keras_hub_internals.ENCODER_ATTENTION_ATTRIBUTE
    )
    # Every variable of the encoder is one of these layers'.
    owned = {id(v) for layer in layers for v in layer.weights}
    assert owned == {id(v) for v in encoder.weights}
