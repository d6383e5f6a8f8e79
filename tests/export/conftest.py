"""Tiny presets and their exports, built once per test session."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import tupe_tf
import tupe_tf.export
from tests.sizes import encoder_sizes
from tests.test_case import SPECIAL_TOKENS
from tests.test_case import WORDS

VOCAB = SPECIAL_TOKENS + WORDS
SEQ_LENGTH = 16
NUM_CLASSES = 3

# Raw text covering the tokenizer's cases: case, accents, punctuation, CJK,
# unknown words, control and zero-width characters, empty strings, and
# texts longer than SEQ_LENGTH (truncation).
TEXTS_A = [
    "The quick brown fox jumped over the lazy dog!",
    "",
    "Café UNBELIEVABLE cats, 猫猫 [CLS] [SEP] x",
    "the " * 40,
    "a\tcat\u200bsat\x07on  the   mat.",
    "dogs" + "s" * 120,
]
TEXTS_B = [
    "a cat sat on the mat.",
    "dogs",
    "",
    "fox " * 30,
    "not good, very bad",
    "",
]


def tiny_backbone(position_encoding, **options):
    return tupe_tf.TupeBackbone(
        vocabulary_size=len(VOCAB),
        max_sequence_length=32,
        position_encoding=position_encoding,
        **encoder_sizes(32),
        **options,
    )


def randomize(model):
    """Non-trivial weights (BERT init leaves LayerNorm/bias at 1/0)."""
    rng = np.random.default_rng(0)
    for variable in model.weights:
        value = np.asarray(variable.numpy())
        if np.issubdtype(value.dtype, np.floating):
            variable.assign(value + rng.normal(0, 0.1, value.shape))


class Exports:
    """In-memory models and the paths of their exports."""


@pytest.fixture(scope="session")
def exports(tmp_path_factory):
    keras.utils.set_random_seed(7)
    root = tmp_path_factory.mktemp("export")
    tokenizer = tupe_tf.TupeTokenizer(vocabulary=VOCAB, lowercase=True)
    out = Exports()
    out.root = root

    # A pair classifier on TUPE-R.
    out.classifier_preprocessor = tupe_tf.TupeTextClassifierPreprocessor(
        tokenizer, sequence_length=SEQ_LENGTH
    )
    out.classifier = tupe_tf.TupeTextClassifier(
        tiny_backbone("tupe-r"),
        num_classes=NUM_CLASSES,
        preprocessor=out.classifier_preprocessor,
    )
    randomize(out.classifier)
    out.classifier_preset = str(root / "classifier_preset")
    out.classifier.save_to_preset(out.classifier_preset)

    # A masked-LM preset on DIET-ABS with per-head segments: exports as a
    # backbone.
    mlm_preprocessor = tupe_tf.TupeMaskedLMPreprocessor(
        tokenizer, sequence_length=SEQ_LENGTH
    )
    out.backbone = tiny_backbone("diet-abs", segment_encoding="per-head")
    randomize(out.backbone)
    masked_lm = tupe_tf.TupeMaskedLM(
        out.backbone, preprocessor=mlm_preprocessor
    )
    out.backbone_preset = str(root / "mlm_preset")
    masked_lm.save_to_preset(out.backbone_preset)

    def export(name, preset, export_format, **kwargs):
        path = str(root / name)
        tupe_tf.export.export_preset(
            preset, path, export_format, seq_length=SEQ_LENGTH, **kwargs
        )
        return path

    out.serving_pair = export(
        "serving_pair",
        out.classifier_preset,
        "serving",
        text_fields=["premise", "hypothesis"],
    )
    out.serving_backbone = export(
        "serving_backbone", out.backbone_preset, "serving"
    )
    out.encoder = export("encoder", out.classifier_preset, "hub_encoder")
    out.backbone_encoder = export(
        "backbone_encoder", out.backbone_preset, "hub_encoder"
    )
    out.preprocessor = export(
        "preprocessor", out.classifier_preset, "hub_preprocessor"
    )
    return out


@pytest.fixture(scope="session")
def load_once():
    """`tf.saved_model.load`, cached by path, for tests that only read."""
    cache = {}

    def load(path):
        if path not in cache:
            cache[path] = tf.saved_model.load(path)
        return cache[path]

    return load


def in_memory_packed(preprocessor, *segments):
    """keras-hub's packing of raw text (`call` so a pair is not (x, y))."""
    if not preprocessor.built:
        preprocessor.build(None)
    x = preprocessor.call(tuple(tf.constant(s) for s in segments))
    return {name: np.asarray(t).astype("int32") for name, t in x.items()}


def encoder_inputs(packed):
    return {
        "input_word_ids": packed["token_ids"],
        "input_mask": packed["padding_mask"],
        "input_type_ids": packed["segment_ids"],
    }


def backbone_inputs(encoder_input):
    return {
        "token_ids": encoder_input["input_word_ids"],
        "segment_ids": encoder_input["input_type_ids"],
        "padding_mask": encoder_input["input_mask"],
    }


def in_memory_encoder_outputs(backbone, encoder_input):
    """pooled/sequence outputs and every layer's output, in memory."""
    model = tupe_tf.export.hub_encoder.encoder_outputs_model(backbone)
    outputs = model(backbone_inputs(encoder_input), training=False)
    return {
        "pooled_output": np.asarray(outputs["pooled_output"]),
        "sequence_output": np.asarray(outputs["sequence_output"]),
        "encoder_outputs": [np.asarray(t) for t in outputs["encoder_outputs"]],
    }
