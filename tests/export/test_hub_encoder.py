"""The TF Hub-style encoder SavedModel against the in-memory backbone."""

import numpy as np
import pytest
import tensorflow as tf

import tupe_tf.export
from tests.export.conftest import SEQ_LENGTH
from tests.export.conftest import TEXTS_A
from tests.export.conftest import TEXTS_B
from tests.export.conftest import encoder_inputs
from tests.export.conftest import in_memory_encoder_outputs
from tests.export.conftest import in_memory_packed

pytestmark = pytest.mark.large


def _inputs(exports, length=SEQ_LENGTH):
    packed = in_memory_packed(exports.classifier_preprocessor, TEXTS_A, TEXTS_B)
    return {name: t[:, :length] for name, t in encoder_inputs(packed).items()}


def _assert_close(exported, expected):
    for name in ("pooled_output", "sequence_output"):
        np.testing.assert_allclose(
            exported[name], expected[name], atol=1e-5, err_msg=name
        )
    np.testing.assert_allclose(
        exported["default"], expected["pooled_output"], atol=1e-5
    )
    assert len(exported["encoder_outputs"]) == len(expected["encoder_outputs"])
    for got, want in zip(
        exported["encoder_outputs"], expected["encoder_outputs"]
    ):
        np.testing.assert_allclose(got, want, atol=1e-5)


@pytest.mark.parametrize("length", [SEQ_LENGTH, 9])
@pytest.mark.parametrize("which", ["encoder", "backbone_encoder"])
def test_matches_in_memory_at_exported_and_other_lengths(
    exports, load_once, which, length
):
    backbone = (
        exports.classifier.backbone if which == "encoder" else exports.backbone
    )
    encoder = load_once(getattr(exports, which))
    inputs = _inputs(exports, length)
    expected = in_memory_encoder_outputs(backbone, inputs)
    _assert_close(encoder(inputs), expected)
    _assert_close(encoder(inputs, training=False), expected)
    _assert_close(encoder.serve(inputs), expected)
    signature = encoder.signatures["serving_default"](
        **{name: tf.constant(t) for name, t in inputs.items()}
    )
    np.testing.assert_allclose(
        signature["pooled_output"], expected["pooled_output"], atol=1e-5
    )
    np.testing.assert_allclose(
        signature["encoder_outputs_1"],
        expected["encoder_outputs"][1],
        atol=1e-5,
    )


def test_position_bias_is_folded_only_at_the_exported_length(exports):
    """Changing the position weights of the loaded model changes nothing at
    the folded length (a constant), but changes other lengths and the
    training graph (which keeps the bias trainable)."""
    encoder = tf.saved_model.load(exports.encoder)
    position_weights = [
        v for v in encoder.variables if "untied_position_bias" in v.name
    ]
    assert position_weights
    at_folded, at_other = _inputs(exports), _inputs(exports, 9)
    before_folded = encoder(at_folded)["sequence_output"].numpy()
    before_other = encoder(at_other)["sequence_output"].numpy()
    for variable in position_weights:
        variable.assign(variable + 0.5)
    np.testing.assert_array_equal(
        encoder(at_folded)["sequence_output"].numpy(), before_folded
    )
    assert not np.allclose(
        encoder(at_other)["sequence_output"], before_other, atol=1e-3
    )
    # The training graph computes the bias from the weights at every length.
    with tf.GradientTape() as tape:
        outputs = encoder(at_folded, training=True)
        loss = tf.reduce_sum(outputs["sequence_output"])
    gradients = tape.gradient(loss, position_weights)
    assert all(g is not None and np.any(np.asarray(g) != 0) for g in gradients)


def test_unfolded_export_follows_the_weights_at_every_length(exports, tmp_path):
    path = str(tmp_path / "unfolded")
    tupe_tf.export.export_hub_encoder(
        exports.classifier.backbone,
        path,
        seq_length=SEQ_LENGTH,
        fold_positional_bias=False,
    )
    encoder = tf.saved_model.load(path)
    inputs = _inputs(exports)
    expected = in_memory_encoder_outputs(exports.classifier.backbone, inputs)
    _assert_close(encoder(inputs), expected)
    before = encoder(inputs)["sequence_output"].numpy()
    for variable in encoder.variables:
        if "untied_position_bias" in variable.name:
            variable.assign(variable + 0.5)
    assert not np.allclose(
        encoder(inputs)["sequence_output"], before, atol=1e-3
    )


def test_variables_and_reusable_savedmodel_attributes(exports, load_once):
    encoder = load_once(exports.encoder)
    names = {v.name for v in encoder.trainable_variables}
    assert len(names) == len(exports.classifier.backbone.trainable_weights)
    assert len(encoder.regularization_losses) == 0
    assert {v.name for v in encoder.variables} >= names


def test_refuses_wrong_dtype_rank_and_too_long_inputs(exports, load_once):
    encoder = load_once(exports.encoder)
    signature = encoder.signatures["serving_default"]
    inputs = {k: tf.constant(v) for k, v in _inputs(exports).items()}
    with pytest.raises((TypeError, tf.errors.InvalidArgumentError)):
        signature(**{k: tf.cast(v, tf.float32) for k, v in inputs.items()})
    with pytest.raises((ValueError, tf.errors.InvalidArgumentError)):
        signature(**{k: v[0] for k, v in inputs.items()})  # rank 1
    too_long = {k: tf.tile(v, (1, 3)) for k, v in inputs.items()}  # 48 > 32
    with pytest.raises(
        tf.errors.InvalidArgumentError, match="max_sequence_length"
    ):
        signature(**too_long)
