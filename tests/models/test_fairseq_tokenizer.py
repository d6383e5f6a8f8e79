"""The TUPE authors' tokenization against the ids of their own scripts.

tests/fixtures/fairseq_tokenization/ was written by
tests/fixtures/make_fairseq_tokenization_fixture.py, which ran their GLUE
pipeline (their Python cleanup, perl Moses, compiled fastBPE, their fairseq
Dictionary, Binarizer and sentence-pair datasets) on CoLA and SST-2
sentences and on adversarial text; these tests need none of those.
"""

import base64
import json
import os

import keras
import keras_hub
import numpy as np
import pytest
import tensorflow as tf

import tupe_tf
from tests.sizes import encoder_sizes
from tupe_tf.models.fairseq.fairseq_glue_text import glue_words
from tupe_tf.utils.errors import UserError

FIXTURE = os.path.join(
    os.path.dirname(__file__), "..", "fixtures", "fairseq_tokenization"
)
DICTIONARY = os.path.join(FIXTURE, "dict.txt")
CODES = os.path.join(FIXTURE, "bpe-code")
EOS = 2
PAD = 1

# CI runs tests/models on each Keras backend; what these check runs in
# TensorFlow and Python whichever it is, so once is enough.
pytestmark = pytest.mark.skipif(
    keras.backend.backend() != "tensorflow",
    reason="the tokenization runs in TensorFlow and Python on every backend",
)


@pytest.fixture(scope="module")
def fixture():
    with open(os.path.join(FIXTURE, "cases.json"), encoding="utf-8") as file:
        return json.load(file)


@pytest.fixture(scope="module")
def texts(fixture):
    return [
        base64.b64decode(case["bytes"]) if "bytes" in case else case["text"]
        for case in fixture["cases"]
    ]


@pytest.fixture(scope="module")
def tokenizer():
    return tupe_tf.TupeFairseqTokenizer(dictionary=DICTIONARY, bpe_codes=CODES)


def mismatches(got, want, texts):
    """The cases whose result differs, for the assertion's message."""
    return [(text, g, w) for text, g, w in zip(texts, got, want) if g != w][:5]


def test_words_are_their_moses_output(fixture, texts):
    want = [case["moses"].split() for case in fixture["cases"]]
    got = [glue_words(text) for text in texts]
    assert not mismatches(got, want, texts)


def test_bpe_symbols_are_their_fastbpe_output(fixture, texts, tokenizer):
    want = [case["bpe"].split() for case in fixture["cases"]]
    got = [
        [
            s
            for word in case["moses"].split()
            for s in tokenizer.codes.split_word(word)
        ]
        for case in fixture["cases"]
    ]
    assert not mismatches(got, want, texts)


def test_ids_are_their_binarizer_output(fixture, texts, tokenizer):
    want = [case["ids"] for case in fixture["cases"]]
    got = [tokenizer.encode(text) + [EOS] for text in texts]
    assert not mismatches(got, want, texts)
    # The dictionary's size and <mask> are those of their task's dictionary.
    assert tokenizer.vocabulary_size() == fixture["vocabulary_size"]
    assert tokenizer.mask_token_id == fixture["mask_id"]
    assert sum(i == tokenizer.unk_token_id for ids in want for i in ids) > 10


def test_pairs_are_their_sentence_prediction_layout(fixture, texts, tokenizer):
    pairs = fixture["pairs"]
    length = max(len(pair["ids"]) for pair in pairs)
    preprocessor = tupe_tf.TupeFairseqTextClassifierPreprocessor(
        tokenizer, sequence_length=length
    )
    first = [texts[pair["first"]] for pair in pairs]
    second = [texts[pair["second"]] for pair in pairs]
    got = np.asarray(preprocessor(x=(first, second))["token_ids"])
    want = [pair["ids"] + [PAD] * (length - len(pair["ids"])) for pair in pairs]
    assert not mismatches(got.tolist(), want, list(zip(first, second)))


def test_tf_data_gives_the_same_ids(fixture, texts, tokenizer):
    """Inside tf.data the text steps run through tf.py_function."""
    dataset = tf.data.Dataset.from_tensor_slices(
        [t.encode("utf-8") if isinstance(t, str) else t for t in texts]
    )
    got = []
    for batch in dataset.batch(64).map(tokenizer):
        got.extend(ids + [EOS] for ids in batch.to_list())
    want = [case["ids"] for case in fixture["cases"]]
    assert not mismatches(got, want, texts)


def test_a_line_break_reads_as_a_space(tokenizer):
    # Their pipeline reads a line per example; one text has one line here.
    spaced = tokenizer.encode("the film , it 's good")
    for broken in ("the film ,\nit 's good", "the film ,\r\nit 's good\n"):
        assert tokenizer.encode(broken) == spaced


def tiny_backbone(vocabulary_size):
    return tupe_tf.TupeBackbone(
        vocabulary_size=vocabulary_size,
        max_sequence_length=32,
        segment_encoding="none",
        **encoder_sizes(16),
    )


def test_preset_restores_the_tokenizer_and_pair_layout(tmp_path, tokenizer):
    preset = str(tmp_path)
    tiny_backbone(tokenizer.vocabulary_size()).save_to_preset(preset)
    tupe_tf.TupeFairseqTextClassifierPreprocessor(
        tokenizer, sequence_length=24
    ).save_to_preset(preset)
    for name in ("dict.txt", "bpe-code"):
        with open(os.path.join(preset, "assets", "tokenizer", name), "rb") as f:
            with open(os.path.join(FIXTURE, name), "rb") as original:
                assert f.read() == original.read()

    restored = keras_hub.models.Tokenizer.from_preset(preset)
    assert isinstance(restored, tupe_tf.TupeFairseqTokenizer)
    text = "A caf\u00e9's \u201cquoted\u201d URL: www.example.com!"
    assert restored.encode(text) == tokenizer.encode(text)
    # What TupeTextClassifier.from_preset loads: the fairseq pair layout.
    preprocessor = tupe_tf.TupeTextClassifierPreprocessor.from_preset(preset)
    assert isinstance(
        preprocessor, tupe_tf.TupeFairseqTextClassifierPreprocessor
    )
    packed = preprocessor(x=(["a b"], ["c"]))["token_ids"][0]
    a, c = tokenizer.encode("a b"), tokenizer.encode("c")
    assert list(np.asarray(packed[: len(a) + len(c) + 4])) == (
        [0, *a, EOS, EOS, *c, EOS]
    )
    # A masked-LM preprocessor built on the preset masks with <mask>.
    masked = tupe_tf.TupeMaskedLMPreprocessor.from_preset(
        preset, sequence_length=24, mask_selection_rate=1.0, mask_token_rate=1.0
    )
    assert masked.tokenizer.mask_token_id == tokenizer.mask_token_id
    x, _, _ = masked(["the film is good"])
    ids = np.asarray(x["token_ids"][0])
    assert ids[0] == 0 and tokenizer.mask_token_id in ids


def test_refuses_missing_or_half_given_assets():
    with pytest.raises(ValueError, match="both `dictionary` and `bpe_codes`"):
        tupe_tf.TupeFairseqTokenizer(dictionary=DICTIONARY)
    with pytest.raises(ValueError, match="No dictionary and codes are set"):
        tupe_tf.TupeFairseqTokenizer().encode("text")


def test_refuses_codes_that_are_not_fastbpe_codes(tmp_path):
    codes = tmp_path / "bpe-code"
    codes.write_text("t h 5\nno count\n")
    with pytest.raises(UserError, match="line 2 is 'no count'"):
        tupe_tf.TupeFairseqTokenizer(
            dictionary=DICTIONARY, bpe_codes=str(codes)
        )
