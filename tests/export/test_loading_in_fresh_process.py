"""Exports load in a fresh process and match the in-memory model.

Each check runs `fresh_process_checks.py` in a new interpreter (nothing
cached from the exporting process), once with Keras 3 and once with tf-keras
(`tensorflow_hub.KerasLayer`).
"""

import os
import subprocess
import sys

import numpy as np
import pytest

from tests.export.conftest import SEQ_LENGTH
from tests.export.conftest import TEXTS_A
from tests.export.conftest import TEXTS_B
from tests.export.conftest import backbone_inputs
from tests.export.conftest import encoder_inputs
from tests.export.conftest import in_memory_encoder_outputs
from tests.export.conftest import in_memory_packed

pytestmark = pytest.mark.large

CHECKS = os.path.join(os.path.dirname(__file__), "fresh_process_checks.py")


@pytest.fixture(scope="module")
def reference(exports):
    """In-memory results and export paths, saved for the subprocess."""
    return save_reference(
        exports.classifier,
        exports.classifier_preprocessor,
        encoder=exports.encoder,
        preprocessor_export=exports.preprocessor,
        serving=exports.serving_pair,
        root=exports.root,
    )


def save_reference(
    classifier, preprocessor, encoder, preprocessor_export, serving, root
):
    """Writes `reference.npz` under `root` for `fresh_process_checks.py`:
    the export paths and the in-memory pair classifier's results."""
    backbone = classifier.backbone
    pair = encoder_inputs(in_memory_packed(preprocessor, TEXTS_A, TEXTS_B))
    single = encoder_inputs(in_memory_packed(preprocessor, TEXTS_A))
    outputs = in_memory_encoder_outputs(backbone, pair)
    ref = {
        "encoder": encoder,
        "preprocessor": preprocessor_export,
        "serving": serving,
        "texts_a": np.array(TEXTS_A),
        "texts_b": np.array(TEXTS_B),
        "seq_length": SEQ_LENGTH,
        "num_layers": backbone.num_layers,
        "num_trainable": len(backbone.trainable_weights),
        "pooled_output": outputs["pooled_output"],
        "sequence_output": outputs["sequence_output"],
        "logits": np.asarray(classifier(backbone_inputs(pair))),
        "single_pooled_output": in_memory_encoder_outputs(backbone, single)[
            "pooled_output"
        ],
        **pair,
        **{f"single_{name}": t for name, t in single.items()},
        **{
            f"encoder_outputs_{i}": t
            for i, t in enumerate(outputs["encoder_outputs"])
        },
    }
    path = os.path.join(root, "reference.npz")
    np.savez(path, **ref)
    return path


def run_checks(mode, *references):
    """Runs `fresh_process_checks.py` in `mode` on `references` in one fresh
    process; returns {reference: the `OK` lines of its checks}."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(CHECKS)))
    env = dict(os.environ)
    env.pop("TF_USE_LEGACY_KERAS", None)
    # The checkout itself, installed or not.
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    result = subprocess.run(
        [sys.executable, CHECKS, mode, *references],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=root,
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    passed = {}
    for line in result.stdout.splitlines():
        if line.startswith("REFERENCE "):
            checked = passed.setdefault(line.split(" ", 1)[1], [])
        elif line.startswith("OK "):
            checked.append(line)
    return passed


def test_keras3_saved_model_load_tfsm_layer_and_hub_load(reference):
    passed = run_checks("keras3", reference)[reference]
    assert len(passed) == 8, passed


def test_tf_keras_hub_keras_layer_trainable(reference):
    passed = run_checks("tf_keras", reference)[reference]
    assert len(passed) == 4, passed
