"""keras-hub family: BertMaskedLM/BertTextClassifier, presets, .keras files."""

import os

import keras
import keras_hub
import numpy as np
import pytest
from absl.testing import parameterized

import tupe_tf
from tests.sizes import encoder_sizes
from tests.test_case import SPECIAL_TOKENS
from tests.test_case import WORDS
from tests.test_case import TestCase
from tests.test_case import assert_allclose

VOCAB = SPECIAL_TOKENS + WORDS[:15]


def tiny_backbone(**options):
    return tupe_tf.TupeBackbone(
        vocabulary_size=len(VOCAB),
        max_sequence_length=32,
        **encoder_sizes(32),
        **options,
    )


@pytest.mark.parametrize("option", ["tupe-r", "rope", "alibi"])
def test_keras_hub_bert_tasks_accept_the_backbone(option):
    backbone = tiny_backbone(position_encoding=option)
    mlm = keras_hub.models.BertMaskedLM(backbone=backbone, preprocessor=None)
    x = {
        "token_ids": np.array([[2, 5, 4, 7, 3, 0]] * 2, "int32"),
        "segment_ids": np.zeros((2, 6), "int32"),
        "padding_mask": np.array([[1, 1, 1, 1, 1, 0]] * 2, "int32"),
        "mask_positions": np.array([[2, 3]] * 2, "int32"),
    }
    assert mlm(x).shape == (2, 2, len(VOCAB))
    classifier = keras_hub.models.BertTextClassifier(
        backbone=backbone, num_classes=3, preprocessor=None
    )
    x.pop("mask_positions")
    assert classifier(x).shape == (2, 3)


class TupeFamilyTest(TestCase):
    @parameterized.named_parameters(
        (option, option)
        for option in ("tupe-r", "diet-abs", "bert-ad", "rope", "alibi")
        + ("sinusoidal", "nope", "kerple-log", "fire", "shaw")
    )
    def test_masked_lm_preset_round_trip(self, option):
        tokenizer = tupe_tf.TupeTokenizer(vocabulary=VOCAB, lowercase=True)
        preprocessor = tupe_tf.TupeMaskedLMPreprocessor(
            tokenizer, sequence_length=12
        )
        backbone = tiny_backbone(
            position_encoding=option, segment_encoding="per-head"
        )
        mlm = tupe_tf.TupeMaskedLM(backbone, preprocessor=preprocessor)
        preset = os.path.join(self.get_temp_dir(), "preset")
        mlm.save_to_preset(preset)
        assert {
            "config.json",
            "model.weights.h5",
            "tokenizer.json",
            "task.json",
        } <= set(os.listdir(preset))

        x = {
            "token_ids": np.array([[2, 5, 4, 7, 3, 0]], "int32"),
            "segment_ids": np.array([[0, 0, 0, 1, 1, 0]], "int32"),
            "padding_mask": np.array([[1, 1, 1, 1, 1, 0]], "int32"),
        }
        # An unknown preset is refused; the preset gives the model's outputs,
        # and builds without its weights too.
        self.run_preset_test(
            cls=tupe_tf.TupeBackbone,
            preset=preset,
            input_data=x,
            expected_output=backbone(x),
        )
        restored = tupe_tf.TupeBackbone.from_preset(preset)
        assert isinstance(restored, tupe_tf.TupeBackbone)
        assert restored.position_encoding == option
        assert_allclose(
            restored(x)["sequence_output"],
            backbone(x)["sequence_output"],
            atol=1e-6,
        )

        task = keras_hub.models.MaskedLM.from_preset(preset)
        assert isinstance(task, tupe_tf.TupeMaskedLM)
        assert isinstance(task.preprocessor, tupe_tf.TupeMaskedLMPreprocessor)
        masked = {**x, "mask_positions": np.array([[2, 3]], "int32")}
        assert_allclose(task(masked), mlm(masked), atol=1e-5)

        # keras-hub's classifier preprocessors default to 512 tokens; a preset
        # of a shorter backbone takes its length explicitly.
        classifier_preprocessor = (
            keras_hub.models.TextClassifierPreprocessor.from_preset(
                preset, sequence_length=12
            )
        )
        classifier = keras_hub.models.TextClassifier.from_preset(
            preset, num_classes=2, preprocessor=classifier_preprocessor
        )
        assert isinstance(classifier, tupe_tf.TupeTextClassifier)
        assert isinstance(
            classifier.preprocessor, tupe_tf.TupeTextClassifierPreprocessor
        )
        probabilities = classifier.predict(
            (["the quick fox", "a cat"], ["the dog sat", "on the mat"]),
            verbose=0,
        )
        assert probabilities.shape == (2, 2)
        assert isinstance(
            keras_hub.tokenizers.Tokenizer.from_preset(preset),
            tupe_tf.TupeTokenizer,
        )

    @parameterized.parameters(
        {
            "options": dict(
                position_encoding="diet-abs",
                position_rank=3,
                position_sharing="head-wise",
                segment_encoding="per-head",
            )
        },
        {"options": dict(position_encoding="rope", rope_max_wavelength=500.0)},
        {"options": dict(position_encoding="tupe-r", cls_relative="reference")},
        {
            "options": dict(
                position_encoding="tupe-r",
                cls_relative="reference",
                layer_norm_epsilon=1e-5,
                intermediate_activation="gelu",
                segment_encoding="none",
            )
        },
    )
    def test_backbone_config_round_trip_keeps_every_option(self, options):
        backbone = tiny_backbone(**options)
        self.run_serialization_test(backbone)
        clone = tupe_tf.TupeBackbone.from_config(backbone.get_config())
        assert clone.count_params() == backbone.count_params()
        for name, value in options.items():
            assert clone.get_config()[name] == value

    def test_misspelt_backbone_argument_is_refused_with_a_suggestion(self):
        with pytest.raises(TypeError) as error:
            tupe_tf.TupeBackbone(
                vocabulary_size=50,
                max_sequence_length=16,
                **encoder_sizes(8, num_layers=1),
                position_encodingg="bert",
                positon_rank=3,
            )
        message = str(error.value)
        assert (
            "`position_encodingg` (did you mean `position_encoding`?)"
            in message
        )
        assert "`positon_rank` (did you mean `position_rank`?)" in message
        # What Keras passes when deserializing is still accepted.
        backbone = tiny_backbone(name="named", trainable=False, dtype="float32")
        self.run_serialization_test(backbone)
        clone = tupe_tf.TupeBackbone.from_config(backbone.get_config())
        assert clone.name == "named" and clone.trainable is False


@pytest.mark.parametrize("option", tupe_tf.POSITION_ENCODINGS)
def test_keras_file_round_trip(tmp_path, option):
    backbone = tiny_backbone(position_encoding=option)
    mlm = tupe_tf.TupeMaskedLM(backbone, preprocessor=None)
    x = {
        "token_ids": np.array([[2, 5, 6, 7, 3]], "int32"),
        "segment_ids": np.array([[0, 0, 1, 1, 1]], "int32"),
        "padding_mask": np.ones((1, 5), "int32"),
        "mask_positions": np.array([[1, 2]], "int32"),
    }
    path = str(tmp_path / "model.keras")
    mlm.save(path)
    restored = keras.saving.load_model(path)
    assert isinstance(restored, tupe_tf.TupeMaskedLM)
    assert restored.backbone.get_config() == backbone.get_config()
    assert_allclose(restored(x), mlm(x), atol=1e-6)


def test_check_preset_names_what_is_wrong(tmp_path):
    preset = str(tmp_path / "preset")
    tiny_backbone(position_encoding="diet-rel").save_to_preset(preset)
    metadata = tupe_tf.check_preset(preset)
    assert metadata["tupe_tf_version"] == tupe_tf.__version__

    import json

    path = os.path.join(preset, "metadata.json")
    edited = dict(metadata, tupe_tf_version="9.9.0")
    with open(path, "w") as f:
        json.dump(edited, f)
    with pytest.raises(ValueError, match="saved by tupe-tf 9.9.0"):
        tupe_tf.check_preset(preset)
    os.remove(os.path.join(preset, "model.weights.h5"))
    with pytest.raises(ValueError, match="model.weights.h5"):
        tupe_tf.check_preset(preset)
    with pytest.raises(ValueError, match="does not exist"):
        tupe_tf.check_preset(str(tmp_path / "nowhere"))


def test_family_classes_refuse_misspellings_with_a_suggestion():
    backbone = tiny_backbone()
    tokenizer = tupe_tf.TupeTokenizer(vocabulary=VOCAB, lowercase=True)
    cases = [
        (
            lambda: tupe_tf.TupeMaskedLM(backbone, preprocesor=None),
            "TupeMaskedLM",
            "`preprocesor` (did you mean `preprocessor`?)",
        ),
        (
            lambda: tupe_tf.TupeTextClassifier(
                backbone, num_classes=2, dropuot=0.3
            ),
            "TupeTextClassifier",
            "`dropuot` (did you mean `dropout`?)",
        ),
        (
            lambda: tupe_tf.TupeTokenizer(vocabulary=VOCAB, lowercse=True),
            "TupeTokenizer",
            "`lowercse` (did you mean `lowercase`?)",
        ),
        (
            lambda: tupe_tf.TupeMaskedLMPreprocessor(
                tokenizer, sequence_lenght=8
            ),
            "TupeMaskedLMPreprocessor",
            "`sequence_lenght` (did you mean `sequence_length`?)",
        ),
        (
            lambda: tupe_tf.TupeTextClassifierPreprocessor(
                tokenizer, 8, truncat="waterfall"
            ),
            "TupeTextClassifierPreprocessor",
            "`truncat` (did you mean `truncate`?)",
        ),
    ]
    for build, owner, hint in cases:
        with pytest.raises(TypeError) as error:
            build()
        message = str(error.value)
        assert message.startswith(f"{owner} got unknown keyword argument(s)")
        assert hint in message


def test_classifier_with_preprocessor_round_trips_through_keras_and_preset(
    tmp_path,
):
    tokenizer = tupe_tf.TupeTokenizer(vocabulary=VOCAB, lowercase=True)
    classifier = tupe_tf.TupeTextClassifier(
        tiny_backbone(position_encoding="diet-rel"),
        num_classes=3,
        preprocessor=tupe_tf.TupeTextClassifierPreprocessor(
            tokenizer, sequence_length=12
        ),
        activation="softmax",
        dropout=0.2,
        name="classifier",
    )
    texts = ["the quick fox", "a cat sat"]
    expected = classifier.predict(texts, verbose=0)
    path = str(tmp_path / "classifier.keras")
    classifier.save(path)
    restored = keras.saving.load_model(path)
    assert isinstance(restored, tupe_tf.TupeTextClassifier)
    assert restored.dropout == 0.2 and restored.name == "classifier"
    assert_allclose(restored.predict(texts, verbose=0), expected, atol=1e-6)
    preset = str(tmp_path / "preset")
    classifier.save_to_preset(preset)
    loaded = keras_hub.models.TextClassifier.from_preset(preset)
    assert isinstance(loaded, tupe_tf.TupeTextClassifier)
    assert_allclose(loaded.predict(texts, verbose=0), expected, atol=1e-6)
