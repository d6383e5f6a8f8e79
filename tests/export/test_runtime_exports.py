"""ONNX Runtime and LiteRT exports: every encoding equal to Keras."""

import os

import keras
import numpy as np
import pytest

import tupe_tf
import tupe_tf.export
from tests.export.conftest import VOCAB
from tests.export.conftest import randomize
from tests.sizes import encoder_sizes
from tupe_tf.utils.backbone_options import POSITION_ENCODINGS
from tupe_tf.utils.errors import UserError

pytest.importorskip("tf2onnx", reason="the onnx extra is not installed")
pytest.importorskip("onnxruntime", reason="the onnx extra is not installed")
pytest.importorskip(
    "ai_edge_litert.interpreter", reason="the litert extra is not installed"
)

pytestmark = pytest.mark.large

FORMATS = ("onnx", "litert")
TRAINED_LENGTH = 16
SHORTER_LENGTH = 9
TOLERANCE = 1e-4

# Every option of the study's table, its ablation and each RoPE scaling.
VARIANTS = {
    **{name: {"position_encoding": name} for name in POSITION_ENCODINGS},
    "tupe-a-tie-cls": {"position_encoding": "tupe-a", "untie_cls": False},
    **{
        f"rope-{scaling}": {
            "position_encoding": "rope",
            "rope_scaling": scaling,
            "rope_scaling_factor": 2.0,
            **({"rope_trained_length": 16} if scaling == "yarn" else {}),
        }
        for scaling in ("linear", "ntk", "yarn")
    },
}


def padded_inputs(batch_size, length, seed=0):
    """Random ids, two segments, the last row padded after half its length."""
    rng = np.random.default_rng(seed)
    token_ids = rng.integers(0, len(VOCAB), (batch_size, length), "int32")
    segment_ids = np.zeros((batch_size, length), "int32")
    segment_ids[:, length // 3 :] = 1
    padding_mask = np.ones((batch_size, length), "int32")
    padding_mask[-1, length // 2 :] = 0
    return {
        "token_ids": token_ids,
        "segment_ids": segment_ids,
        "padding_mask": padding_mask,
    }


def tiny_backbone(options):
    keras.utils.set_random_seed(3)
    backbone = tupe_tf.TupeBackbone(
        vocabulary_size=len(VOCAB),
        max_sequence_length=32,
        **encoder_sizes(16),
        **options,
    )
    randomize(backbone)
    return backbone


def max_difference(runtime_outputs, keras_outputs):
    assert set(runtime_outputs) == set(keras_outputs)
    return max(
        float(np.max(np.abs(runtime_outputs[name] - np.asarray(value))))
        for name, value in keras_outputs.items()
    )


def export_backbone(backbone, export_dir, export_format, fold):
    preset = tupe_tf.export.LoadedPreset(None, {}, None, backbone, None)
    tupe_tf.export.export_runtime(
        preset,
        export_dir,
        export_format,
        seq_length=TRAINED_LENGTH,
        fold_positional_bias=fold,
    )
    return tupe_tf.export.load_runtime_model(export_dir)


def backbone_outputs(backbone, inputs):
    outputs = backbone(inputs, training=False)
    return {
        name: outputs[name] for name in ("sequence_output", "pooled_output")
    }


@pytest.mark.parametrize("export_format", FORMATS)
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_encoding_equals_keras(variant, export_format, tmp_path):
    backbone = tiny_backbone(VARIANTS[variant])
    shapes = [(1, TRAINED_LENGTH), (3, TRAINED_LENGTH)]
    dynamic_shapes = shapes + [(1, SHORTER_LENGTH), (3, SHORTER_LENGTH)]
    # The fixed length, with the bias folded as the SavedModel's.
    folded = export_backbone(
        backbone, str(tmp_path / "folded"), export_format, fold=True
    )
    for batch_size, length in shapes:
        inputs = padded_inputs(batch_size, length)
        difference = max_difference(
            folded(inputs), backbone_outputs(backbone, inputs)
        )
        assert difference < TOLERANCE, (batch_size, length, difference)
    if variant == "sinusoidal" and export_format == "litert":
        return  # Refused at a dynamic length: see the test below.
    dynamic = export_backbone(
        backbone, str(tmp_path / "dynamic"), export_format, fold=False
    )
    for batch_size, length in dynamic_shapes:
        inputs = padded_inputs(batch_size, length, seed=length)
        difference = max_difference(
            dynamic(inputs), backbone_outputs(backbone, inputs)
        )
        assert difference < TOLERANCE, (batch_size, length, difference)


def test_a_fixed_length_file_refuses_another_length(tmp_path):
    backbone = tiny_backbone({"position_encoding": "tupe-r"})
    folded = export_backbone(backbone, str(tmp_path / "x"), "onnx", fold=True)
    with pytest.raises(Exception, match="dimension|Got invalid dimensions"):
        folded(padded_inputs(1, SHORTER_LENGTH))


def test_sinusoidal_litert_at_a_dynamic_length_is_refused(tmp_path):
    backbone = tiny_backbone({"position_encoding": "sinusoidal"})
    export_dir = tmp_path / "sinusoidal"
    with pytest.raises(UserError, match="--format=litert.*sinusoidal"):
        export_backbone(backbone, str(export_dir), "litert", fold=False)
    assert list(tmp_path.iterdir()) == []


@pytest.fixture(scope="module")
def classifier_preset(tmp_path_factory):
    keras.utils.set_random_seed(5)
    tokenizer = tupe_tf.TupeTokenizer(vocabulary=VOCAB, lowercase=True)
    classifier = tupe_tf.TupeTextClassifier(
        tiny_backbone({"position_encoding": "alibi"}),
        num_classes=3,
        preprocessor=tupe_tf.TupeTextClassifierPreprocessor(
            tokenizer, sequence_length=TRAINED_LENGTH
        ),
    )
    randomize(classifier)
    path = str(tmp_path_factory.mktemp("runtime") / "classifier_preset")
    classifier.save_to_preset(path)
    return classifier, path


@pytest.mark.parametrize("export_format", FORMATS)
def test_a_classifier_preset_exports_its_logits(
    classifier_preset, export_format, tmp_path
):
    classifier, preset_dir = classifier_preset
    export_dir = str(tmp_path / export_format)
    path = tupe_tf.export.export_preset(
        preset_dir, export_dir, export_format, seq_length=TRAINED_LENGTH
    )
    assert sorted(os.listdir(path)) == sorted(
        [
            "assets.extra",
            {"onnx": "model.onnx", "litert": "model.tflite"}[export_format],
        ]
    )
    metadata = tupe_tf.export.read_export_metadata(path)
    assert metadata["kind"] == "classifier"
    assert metadata["seq_length"] == TRAINED_LENGTH
    model = tupe_tf.export.load_runtime_model(path)
    inputs = padded_inputs(4, TRAINED_LENGTH)
    logits = np.asarray(classifier(inputs, training=False))
    outputs = model(inputs)
    np.testing.assert_allclose(outputs["logits"], logits, atol=TOLERANCE)
    np.testing.assert_allclose(
        outputs["probabilities"],
        np.asarray(keras.ops.softmax(logits)),
        atol=TOLERANCE,
    )


def test_load_runtime_model_refuses_a_saved_model(tmp_path):
    with pytest.raises(UserError, match="not an ONNX or LiteRT export"):
        tupe_tf.export.load_runtime_model(str(tmp_path))
