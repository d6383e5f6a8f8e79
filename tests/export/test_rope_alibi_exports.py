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


OPTIONS = {
    "rope": dict(position_encoding="rope"),
    # ALiBi together with DIET's per-head segment bias.
    "alibi-per-head": dict(
        position_encoding="alibi", segment_encoding="per-head"
    ),
    "sinusoidal": dict(position_encoding="sinusoidal"),
    "nope": dict(position_encoding="nope"),
    "kerple-log": dict(position_encoding="kerple-log"),
    "fire-per-head": dict(
        position_encoding="fire", segment_encoding="per-head"
    ),
    "shaw": dict(position_encoding="shaw", shaw_max_distance=4),
}


def _export(options, tmp_path_factory, preprocessor_export=None):
    """A tiny classifier of `options`, its preset exported in the three
    formats (the hub preprocessor only where `preprocessor_export` is None:
    the options share one tokenizer and length, so one export serves all);
    returns (classifier, export paths, the checks' reference)."""
    keras.utils.set_random_seed(11)
    options = dict(options)
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
    paths = {"hub_preprocessor": preprocessor_export}
    formats = [
        ("serving", dict(text_fields=["premise", "hypothesis"])),
        ("hub_encoder", {}),
    ]
    if preprocessor_export is None:
        formats.append(("hub_preprocessor", {}))
    for export_format, kwargs in formats:
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


@pytest.fixture(scope="module")
def option_exports(tmp_path_factory):
    """Option id -> `_export`'s result, for every option."""
    first, *others = OPTIONS
    exports = {first: _export(OPTIONS[first], tmp_path_factory)}
    shared = exports[first][1]["hub_preprocessor"]
    for name in others:
        exports[name] = _export(OPTIONS[name], tmp_path_factory, shared)
    return exports


def _checked(option_exports, mode, count):
    """Runs the fresh-process checks of `mode` on every option's exports in
    one process; each option passes `count` checks."""
    references = {name: ref for name, (_, _, ref) in option_exports.items()}
    passed = run_checks(mode, *references.values())
    for name, reference in references.items():
        assert len(passed[reference]) == count, (name, passed[reference])


def test_keras3_loads_all_three_formats(option_exports):
    _checked(option_exports, "keras3", 8)


def test_tf_keras_hub_layer_trains(option_exports):
    _checked(option_exports, "tf_keras", 4)


@pytest.mark.parametrize("option", list(OPTIONS))
def test_exported_encoder_at_another_length(option_exports, option):
    """Folded at SEQ_LENGTH; other lengths take the computed path."""
    classifier, paths, _ = option_exports[option]
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
