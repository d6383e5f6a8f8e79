"""The text of the position probes: the study's vocabulary and split.

The embedded Wikipedia sample is split by documents as the comparison
study splits it (`study_data.split_documents`), a WordPiece vocabulary is
learned on the training documents with the study's learner and size, and
both parts are tokenised into one token stream each. Training examples of
the probes are cut from the training stream, evaluation examples from the
held-out one. Everything is local (the sample ships inside `gensim`) and
built once under a work directory.

Example:

>>> text, fingerprint = prepare_probe_text("runs/probe_data")  # doctest: +SKIP
>>> text.vocabulary_size  # doctest: +SKIP
8192
"""

import json
import os

import numpy as np

import data_pipeline
from data_pipeline.default_data import DEFAULT_VOCAB_SIZE
from data_pipeline.wordpiece_learner import DEFAULT_LEARNER
from tupe_tf.analysis.probe_tasks import ProbeText
from tupe_tf.analysis.study_data import split_documents
from tupe_tf.utils import fileio

MARKER = "probe_data.json"


def data_settings(heldout_fraction, vocab_size=DEFAULT_VOCAB_SIZE):
    """What the probe text depends on (a change rebuilds it)."""
    return {
        "vocab_learner": DEFAULT_LEARNER,
        "vocab_size": int(vocab_size),
        "heldout_fraction": float(heldout_fraction),
        "lowercase": True,
    }


def tokenized_stream(text, tokens):
    """`text`'s token ids, its lines tokenised in order into one stream."""
    from data_pipeline.vocab import fast_bert_tokenizer

    lines = [line for line in text.split("\n") if line.strip()]
    tokenizer = fast_bert_tokenizer(tokens, lowercase=True)
    return tokenizer.tokenize(lines).flat_values.numpy().astype("int32")


def prepare_probe_text(work_dir, heldout_fraction=0.08):
    """Builds (or reuses) the probes' vocabulary and token streams.

    Args:
        work_dir: directory for `vocab.txt`, `streams.npz` and the marker
            `probe_data.json` (written last; with the same settings the
            files are reused).
        heldout_fraction: the study's fraction of characters held out.

    Returns:
        `(ProbeText, fingerprint)`: the text and the sha256 of the
        vocabulary and streams (records name the data they ran on).
    """
    settings = data_settings(heldout_fraction)
    marker = os.path.join(work_dir, MARKER)
    if not (
        os.path.isfile(marker)
        and fileio.read_json(marker, "delete it to build it again.").get(
            "settings"
        )
        == settings
    ):
        _build(work_dir, settings)
    saved = fileio.read_json(marker, "delete it to build it again.")
    return _load(work_dir), saved["fingerprint"]


def _build(work_dir, settings):
    os.makedirs(work_dir, exist_ok=True)
    with open(data_pipeline.embedded_corpus_path()) as f:
        train_text, heldout_text = split_documents(
            f.read(), settings["heldout_fraction"]
        )
    train_txt = os.path.join(work_dir, "train.txt")
    fileio.write_text_atomically(train_txt, train_text)
    vocab_file = os.path.join(work_dir, "vocab.txt")
    data_pipeline.build_vocabulary(
        train_txt,
        settings["vocab_size"],
        vocab_file,
        lowercase=settings["lowercase"],
        learner=settings["vocab_learner"],
    )
    tokens = data_pipeline.load_vocabulary(vocab_file).tokens
    streams = os.path.join(work_dir, "streams.npz")
    with fileio.atomic_file(streams) as temporary:
        with open(temporary, "wb") as f:
            np.savez(
                f,
                train_ids=tokenized_stream(train_text, tokens),
                heldout_ids=tokenized_stream(heldout_text, tokens),
            )
    fingerprint = fileio.sha256_hex(
        "\n".join(fileio.file_sha256(p) for p in (vocab_file, streams)).encode()
    )
    fileio.write_text_atomically(
        os.path.join(work_dir, MARKER),
        json.dumps({"settings": settings, "fingerprint": fingerprint}),
    )


def _load(work_dir):
    tokens = data_pipeline.load_vocabulary(
        os.path.join(work_dir, "vocab.txt")
    ).tokens
    with np.load(os.path.join(work_dir, "streams.npz")) as streams:
        return ProbeText(tokens, streams["train_ids"], streams["heldout_ids"])
