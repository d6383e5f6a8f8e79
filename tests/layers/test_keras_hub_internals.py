import ast
import pathlib

import keras
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
    initializer = keras.initializers.TruncatedNormal(stddev=0.02)
    clone = keras_hub_internals.clone_initializer(initializer)
    assert clone is not initializer
    assert clone.get_config() == initializer.get_config()
    words = keras_hub_internals.pretokenize(
        tf.constant(["Hello, World!"]), lowercase=True
    )
    assert words.to_list() == [[b"hello", b",", b"world", b"!"]]
    assert keras_hub_internals.MAX_BYTES_PER_WORD > 0
