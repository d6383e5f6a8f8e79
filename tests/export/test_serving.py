"""The serving SavedModel: raw strings in, float32 outputs out."""

import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from tests.export.conftest import NUM_CLASSES
from tests.export.conftest import SEQ_LENGTH
from tests.export.conftest import TEXTS_A
from tests.export.conftest import TEXTS_B
from tests.export.conftest import backbone_inputs
from tests.export.conftest import encoder_inputs
from tests.export.conftest import in_memory_packed

pytestmark = pytest.mark.large


def _classifier_logits(exports, *segments):
    packed = in_memory_packed(exports.classifier_preprocessor, *segments)
    return np.asarray(
        exports.classifier(
            backbone_inputs(encoder_inputs(packed)), training=False
        )
    )


def test_pair_classifier_matches_in_memory_on_raw_text(exports, load_once):
    serving = load_once(exports.serving_pair)
    signature = serving.signatures["serving_default"]
    assert set(signature.structured_input_signature[1]) == {
        "premise",
        "hypothesis",
    }
    outputs = signature(
        premise=tf.constant(TEXTS_A), hypothesis=tf.constant(TEXTS_B)
    )
    assert set(outputs) == {"logits", "probabilities"}
    assert outputs["logits"].dtype == tf.float32
    assert outputs["logits"].shape == (len(TEXTS_A), NUM_CLASSES)
    expected = _classifier_logits(exports, TEXTS_A, TEXTS_B)
    np.testing.assert_allclose(outputs["logits"], expected, atol=1e-5)
    np.testing.assert_allclose(
        outputs["probabilities"], tf.nn.softmax(expected), atol=1e-5
    )
    # `serve` (for keras.layers.TFSMLayer) is the same function.
    served = serving.serve(
        {"premise": tf.constant(TEXTS_A), "hypothesis": tf.constant(TEXTS_B)}
    )
    np.testing.assert_allclose(served["logits"], expected, atol=1e-5)


def test_long_and_empty_texts_give_valid_outputs(exports, load_once):
    signature = load_once(exports.serving_pair).signatures["serving_default"]
    long_text = "the quick brown fox " * 200
    outputs = signature(
        premise=tf.constant([long_text, "", ""]),
        hypothesis=tf.constant(["a cat", "a cat", ""]),
    )
    probabilities = outputs["probabilities"].numpy()
    assert np.all(np.isfinite(probabilities))
    np.testing.assert_allclose(probabilities.sum(-1), 1.0, atol=1e-5)
    # Truncated as the preprocessor documents: the same as the in-memory
    # packing at SEQ_LENGTH.
    expected = _classifier_logits(
        exports, [long_text, "", ""], ["a cat", "a cat", ""]
    )
    np.testing.assert_allclose(outputs["logits"], expected, atol=1e-5)


def test_backbone_preset_serves_pooled_and_sequence_outputs(exports, load_once):
    signature = load_once(exports.serving_backbone).signatures[
        "serving_default"
    ]
    outputs = signature(text=tf.constant(TEXTS_A))
    packed = in_memory_packed(exports.classifier_preprocessor, TEXTS_A)
    expected = exports.backbone(backbone_inputs(encoder_inputs(packed)))
    assert outputs["sequence_output"].shape == (len(TEXTS_A), SEQ_LENGTH, 32)
    for name in ("pooled_output", "sequence_output"):
        assert outputs[name].dtype == tf.float32
        np.testing.assert_allclose(outputs[name], expected[name], atol=1e-5)


@pytest.mark.parametrize(
    "bad",
    [
        {"premise": tf.constant([1, 2]), "hypothesis": tf.constant(["a", "b"])},
        {"premise": tf.constant([["a"]]), "hypothesis": tf.constant([["b"]])},
        {"premise": tf.constant(["a"])},
    ],
)
def test_signature_refuses_wrong_dtype_rank_or_missing_field(
    exports, load_once, bad
):
    signature = load_once(exports.serving_pair).signatures["serving_default"]
    with pytest.raises((TypeError, ValueError, tf.errors.InvalidArgumentError)):
        signature(**bad)


# `saved_model_cli` with the TF-Text ops registered (as a model server must
# have them linked in); see docs/export.md.
SAVED_MODEL_CLI = (
    "import tensorflow_text; "
    "from tensorflow.python.tools import saved_model_cli; "
    "saved_model_cli.main()"
)


def test_saved_model_cli_runs_the_signature(exports):
    """TF Serving's contract: `saved_model_cli` sees and runs it."""
    show = subprocess.run(
        [
            sys.executable,
            "-c",
            SAVED_MODEL_CLI,
            "run",
            "--dir",
            exports.serving_pair,
            "--tag_set",
            "serve",
            "--signature_def",
            "serving_default",
            "--input_exprs",
            'premise=["a cat sat on the mat"];hypothesis=["the dog"]',
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert show.returncode == 0, show.stderr[-2000:]
    assert "probabilities" in show.stdout and "logits" in show.stdout
    # The printed probabilities sum to one.
    text = show.stdout.split("output key probabilities:")[1]
    numbers = [
        float(t)
        for t in text.replace("[", " ").replace("]", " ").split()[:NUM_CLASSES]
    ]
    assert abs(sum(numbers) - 1.0) < 1e-4, show.stdout
