"""The model core imports and runs on a machine without TensorFlow."""

import importlib.util
import os
import subprocess
import sys

import pytest

# The child process has no `tensorflow` module (an ImportError on import,
# as on a JAX-only machine), then builds and calls a backbone on JAX.
CHILD = """
import sys
sys.modules["tensorflow"] = None
import numpy as np
import tupe_tf
backbone = tupe_tf.TupeBackbone(
    vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8,
    intermediate_dim=16, position_encoding="tupe-r")
inputs = {
    "token_ids": np.ones((1, 6), "int32"),
    "segment_ids": np.zeros((1, 6), "int32"),
    "padding_mask": np.ones((1, 6), "int32"),
}
print(tuple(backbone(inputs)["sequence_output"].shape))
"""


@pytest.mark.large
@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="needs JAX")
def test_import_and_call_on_jax_without_tensorflow():
    root = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
    result = subprocess.run(
        [sys.executable, "-c", CHILD],
        env={**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": root},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "(1, 6, 8)"
