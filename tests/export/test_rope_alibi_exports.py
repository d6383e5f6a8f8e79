"""The modern options in all three export formats, loaded in a fresh process.

RoPE, ALiBi, sinusoidal, NoPE, KERPLE, FIRE and Shaw et al.'s relative
keys; the learned biases (KERPLE, FIRE) are folded at `SEQ_LENGTH` and
computed at other lengths (Shaw's term depends on the query: never folded).
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

import tupe_tf
import tupe_tf.export
from tests.export.conftest import NUM_CLASSES
from tests.export.conftest import SEQ_LENGTH
from tests.export.conftest import VOCAB
from tests.export.conftest import randomize
from tests.export.conftest import tiny_backbone
from tests.export.test_loading_in_fresh_process import run_checks
from tests.export.test_loading_in_fresh_process import save_reference

pytestmark = pytest.mark.large


@pytest.fixture(
    scope="module",
    params=[
        dict(position_encoding="rope"),
        # ALiBi together with DIET's per-head segment bias.
        dict(position_encoding="alibi", segment_encoding="per-head"),
        dict(position_encoding="sinusoidal"),
        dict(position_encoding="nope"),
        dict(position_encoding="kerple-log"),
        dict(position_encoding="fire", segment_encoding="per-head"),
        dict(position_encoding="shaw", shaw_max_distance=4),
    ],
    ids=[
        "rope",
        "alibi-per-head",
        "sinusoidal",
        "nope",
        "kerple-log",
        "fire-per-head",
        "shaw",
    ],
)
def option_exports(request, tmp_path_factory):
    keras.utils.set_random_seed(11)
    options = dict(request.param)
    root = tmp_path_factory.mktemp(options["position_encoding"])
    tokenizer = tupe_tf.TupeTokenizer(vocabulary=VOCAB, lowercase=True)
    preprocessor = tupe_tf.TupeTextClassifierPreprocessor(
        tokenizer, sequence_length=SEQ_LENGTH
    )
    classifier = tupe_tf.TupeTextClassifier(
        tiny_backbone(options.pop("position_encoding"), **options),
        num_classes=NUM_CLASSES,
        preprocessor=preprocessor,
    )
    randomize(classifier)
    preset = str(root / "preset")
    classifier.save_to_preset(preset)
    paths = {}
    for export_format, kwargs in (
        ("serving", dict(text_fields=["premise", "hypothesis"])),
        ("hub_encoder", {}),
        ("hub_preprocessor", {}),
    ):
        paths[export_format] = str(root / export_format)
        tupe_tf.export.export_preset(
            preset,
            paths[export_format],
            export_format,
            seq_length=SEQ_LENGTH,
            **kwargs,
        )
    reference = save_reference(
        classifier,
        preprocessor,
        encoder=paths["hub_encoder"],
        preprocessor_export=paths["hub_preprocessor"],
        serving=paths["serving"],
        root=str(root),
    )
    return classifier, paths, reference


def test_keras3_loads_all_three_formats(option_exports):
    _, _, reference = option_exports
    passed = run_checks("keras3", reference)
    assert len(passed) == 8, passed


def test_tf_keras_hub_layer_trains(option_exports):
    _, _, reference = option_exports
    passed = run_checks("tf_keras", reference)
    assert len(passed) == 4, passed


def test_exported_encoder_at_another_length(option_exports):
    """Folded at SEQ_LENGTH; other lengths take the computed path."""
    classifier, paths, _ = option_exports
    encoder = tf.saved_model.load(paths["hub_encoder"])
    rng = np.random.default_rng(3)
    for length in (SEQ_LENGTH, 9):
        ids = rng.integers(5, len(VOCAB), (2, length)).astype("int32")
        mask = np.ones((2, length), "int32")
        mask[1, length - 3 :] = 0
        types = np.zeros((2, length), "int32")
        types[:, length // 2 :] = 1
        outputs = encoder(
            {
                "input_word_ids": ids * mask,
                "input_mask": mask,
                "input_type_ids": types * mask,
            }
        )
        expected = classifier.backbone(
            {
                "token_ids": ids * mask,
                "segment_ids": types * mask,
                "padding_mask": mask,
            }
        )
        np.testing.assert_allclose(
            outputs["pooled_output"], expected["pooled_output"], atol=1e-5
        )
