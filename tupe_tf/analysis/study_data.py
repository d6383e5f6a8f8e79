"""Data of the comparison study: a document-level held-out split.

The embedded Wikipedia sample is split by documents (blank-line separated):
the last documents, about `heldout_fraction` of the characters, are held
out. The vocabulary and the training shards come from the other documents
only; the held-out documents are packed into evaluation shards at the
training length and at every longer length of the study, so the length
extrapolation compares the same text cut into longer sequences.

Example:

>>> data = prepare_study_data("runs/study_data", 64, (64, 128, 256))
>>> sorted(data.eval_files)
[64, 128, 256]
"""

import dataclasses
import functools
import json
import math
import os

import data_pipeline
import tupe_tf
from data_pipeline import default_data
from data_pipeline.default_data import DEFAULT_VOCAB_SIZE
from data_pipeline.wordpiece_learner import DEFAULT_LEARNER
from tupe_tf.utils import fileio


@dataclasses.dataclass
class StudyData:
    """Paths of the study's data.

    Attributes:
        vocab_file: WordPiece vocabulary learned on the training documents.
        train_files: training shards at the training length.
        eval_files: `{length: [shard]}` of the held-out documents.
        unigram_loss: cross-entropy (nats) of the held-out masked targets
            under the training targets' unigram frequencies: the loss of a
            model that ignores its input.
        stats: document and character counts of the split.
        fingerprint: sha256 over the vocabulary and every shard: two runs
            with the same fingerprint saw the same data.
    """

    vocab_file: str
    train_files: list
    eval_files: dict
    unigram_loss: float
    stats: dict
    fingerprint: str


def data_fingerprint(vocab_file, train_files, eval_files):
    """sha256 of the vocabulary's and every shard's sha256, in order."""
    paths = [vocab_file, *train_files]
    for length in sorted(eval_files):
        paths.extend(eval_files[length])
    return fileio.sha256_hex(
        "\n".join(fileio.file_sha256(p) for p in paths).encode()
    )


def split_documents(text, heldout_fraction):
    """`(train_text, heldout_text)`: the last documents are held out."""
    documents = [d for d in text.split("\n\n") if d.strip()]
    if len(documents) < 2:
        raise ValueError("The corpus has fewer than two documents.")
    total = sum(len(d) for d in documents)
    heldout, size = [], 0
    while documents and size < heldout_fraction * total:
        heldout.insert(0, documents.pop())
        size += len(heldout[0])
    if not documents:
        raise ValueError(f"heldout_fraction={heldout_fraction} holds out all.")
    return "\n\n".join(documents) + "\n", "\n\n".join(heldout) + "\n"


def _write_text(path, text):
    fileio.write_text_atomically(path, text)


def _shard_files(directory):
    return sorted(
        os.path.join(directory, name)
        for name in os.listdir(directory)
        if name.endswith(".tfrecord")
    )


def _build_shards(text_file, vocab_file, directory, length, num_shards=1):
    """Packs `text_file` into shards of `length` under `directory`."""
    return default_data.build_uncased_shards(
        text_file, vocab_file, directory, length, num_shards
    )


def prepare_study_data(
    work_dir,
    seq_length,
    eval_lengths,
    heldout_fraction=0.08,
    vocab_size=DEFAULT_VOCAB_SIZE,
    num_train_shards=4,
):
    """Builds (or reuses) the study's vocabulary and shards under `work_dir`.

    A finished build writes `<work_dir>/study_data.json` last; with the same
    settings it is reused, otherwise rebuilt.

    Args:
        work_dir: directory for the texts, vocabulary and shards.
        seq_length: training length.
        eval_lengths: lengths of the held-out shards (the training length
            among them).
        heldout_fraction: fraction of the characters held out.
        vocab_size: WordPiece vocabulary size (an upper bound).
        num_train_shards: training shard files.

    Returns:
        A `StudyData`.
    """
    settings = {
        # The learner decides the vocabulary, hence every shard: a changed
        # default must rebuild, not reuse.
        "vocab_learner": DEFAULT_LEARNER,
        "seq_length": int(seq_length),
        "eval_lengths": sorted({int(n) for n in eval_lengths}),
        "heldout_fraction": float(heldout_fraction),
        "vocab_size": int(vocab_size),
        "num_train_shards": int(num_train_shards),
    }
    marker = os.path.join(work_dir, "study_data.json")
    if os.path.isfile(marker):
        saved = fileio.read_json(
            marker, "delete it and the study's data are built again."
        )
        if saved.get("settings") == settings:
            return _from_marker(saved)
    os.makedirs(work_dir, exist_ok=True)
    with open(data_pipeline.embedded_corpus_path()) as f:
        train_text, heldout_text = split_documents(f.read(), heldout_fraction)
    train_txt = os.path.join(work_dir, "train.txt")
    heldout_txt = os.path.join(work_dir, "heldout.txt")
    _write_text(train_txt, train_text)
    _write_text(heldout_txt, heldout_text)
    vocab_file = os.path.join(work_dir, "vocab.txt")
    data_pipeline.build_vocabulary(
        train_txt,
        vocab_size,
        vocab_file,
        lowercase=True,
        learner=DEFAULT_LEARNER,
    )
    train_files = _build_shards(
        train_txt,
        vocab_file,
        os.path.join(work_dir, f"train_{seq_length}"),
        seq_length,
        num_train_shards,
    )
    eval_files = {
        n: _build_shards(
            heldout_txt, vocab_file, os.path.join(work_dir, f"heldout_{n}"), n
        )
        for n in settings["eval_lengths"]
    }
    unigram = unigram_loss(
        train_files, eval_files[int(seq_length)], vocab_file, seq_length
    )
    saved = {
        "settings": settings,
        "vocab_file": os.path.abspath(vocab_file),
        "train_files": [os.path.abspath(p) for p in train_files],
        "eval_files": {
            str(n): [os.path.abspath(p) for p in files]
            for n, files in eval_files.items()
        },
        "unigram_loss": unigram,
        "fingerprint": data_fingerprint(vocab_file, train_files, eval_files),
        "stats": {
            "train_characters": len(train_text),
            "heldout_characters": len(heldout_text),
            "heldout_documents": heldout_text.count("\n\n") + 1,
            "train_documents": train_text.count("\n\n") + 1,
        },
    }
    _write_text(marker, json.dumps(saved, indent=2))
    return _from_marker(saved)


def prepare_beyond_table_data(work_dir, vocab_file, lengths):
    """Held-out shards at `lengths`, packed from the study's held-out text.

    They are evaluation-only data past the models' position tables, so they
    stay out of the study's fingerprint (adding a length keeps the trained
    runs valid); `data_fingerprint(vocab_file, [], files)` names them in the
    records that use them.

    Returns:
        `{length: [shard]}`.
    """
    return {
        n: _reused_or_built(work_dir, "heldout", vocab_file, n)
        for n in sorted({int(n) for n in lengths})
    }


def prepare_extension_data(work_dir, vocab_file, length, num_shards=4):
    """Training shards at `length`, packed from the study's training text.

    An extension's second phase trains on them; like the beyond-table
    shards they stay out of the study's fingerprint.

    Returns:
        The shard paths.
    """
    return _reused_or_built(work_dir, "train", vocab_file, length, num_shards)


def _reused_or_built(work_dir, split, vocab_file, length, num_shards=1):
    """`<work_dir>/<split>_<length>`'s shards, built from `<split>.txt`
    unless already there (shards are published whole or not at all)."""
    directory = os.path.join(work_dir, f"{split}_{length}")
    built = os.path.isdir(directory) and _shard_files(directory)
    text = os.path.join(work_dir, f"{split}.txt")
    return built or _build_shards(
        text, vocab_file, directory, length, num_shards
    )


def _from_marker(saved):
    return StudyData(
        vocab_file=saved["vocab_file"],
        train_files=list(saved["train_files"]),
        eval_files={int(n): list(f) for n, f in saved["eval_files"].items()},
        unigram_loss=float(saved["unigram_loss"]),
        stats=dict(saved["stats"]),
        fingerprint=saved["fingerprint"],
    )


def _masked_targets(files, vocab_file, seq_length):
    import numpy as np

    dataset = data_pipeline.pretraining_dataset(
        files,
        vocab_file,
        seq_length,
        256,
        is_training=False,
        seed=0,
        deterministic=True,
        drop_remainder=False,
    )
    targets = []
    for _, ids, weights in dataset.as_numpy_iterator():
        targets.append(ids[weights > 0])
    return np.concatenate(targets)


def unigram_loss(train_files, eval_files, vocab_file, seq_length):
    """Loss of predicting every held-out masked token by unigram frequency.

    Frequencies are those of the masked targets of one pass over the
    training shards, add-one smoothed over the vocabulary.
    """
    import numpy as np

    with open(vocab_file) as f:
        vocab_size = sum(1 for line in f if line.rstrip("\n"))
    counts = np.bincount(
        _masked_targets(train_files, vocab_file, seq_length),
        minlength=vocab_size,
    ).astype("float64")
    probabilities = (counts + 1.0) / (counts.sum() + vocab_size)
    heldout = _masked_targets(eval_files, vocab_file, seq_length)
    return float(-np.mean(np.log(probabilities[heldout])))


def load_masked_lm(preset_dir):
    """The `TupeMaskedLM` of a preset, without its preprocessor."""
    return tupe_tf.TupeMaskedLM.from_preset(preset_dir, preprocessor=None)


def rebuilt(model, backbone_overrides):
    """`model` with its backbone rebuilt from a changed config, same weights
    (e.g. a longer `max_sequence_length`, a `rope_scaling`).

    Only options whose weight shapes do not depend on the changed arguments
    (`PositionEncoding.length_free` for `max_sequence_length`) can be.
    """
    backbone = type(model.backbone).from_config(
        {**model.backbone.get_config(), **backbone_overrides}
    )
    rebuilt = type(model)(backbone=backbone, preprocessor=None)
    rebuilt.set_weights(model.get_weights())
    return rebuilt


@functools.lru_cache(maxsize=32)
def _heldout_dataset(files, vocab_file, seq_length, batch_size):
    """The held-out batches of `files` (a tuple), built once per process.

    A study evaluates the same shards for every model and length scaling,
    and building a reader (tracing its `tf.data` functions) costs more than
    a small model's pass over them. The masks are stateless functions of
    the seed and the batch index (`data_pipeline.pretraining_dataset`), so
    every pass over the one dataset gives the same batches.
    """
    return data_pipeline.pretraining_dataset(
        list(files),
        vocab_file,
        seq_length,
        batch_size,
        is_training=False,
        seed=0,
        deterministic=True,
        drop_remainder=False,
    )


def evaluate_mlm(model, files, vocab_file, seq_length, batch_size=16):
    """Masked-LM loss of a `TupeMaskedLM` on one full pass over `files`.

    The masks are the reader's deterministic ones (seed 0), so every model
    is scored on the same masked positions. Returns mean loss per masked
    token (nats).
    """
    return heldout_losses(
        model, {seq_length: files}, vocab_file, [seq_length], batch_size
    )[seq_length]


def heldout_losses(model, files_by_length, vocab_file, lengths, batch_size=16):
    """`evaluate_mlm` of one model at each of `lengths`, traced once.

    Args:
        model: a `TupeMaskedLM`.
        files_by_length: `{length: shards}` (a path or a list of paths).
        vocab_file: the shards' vocabulary.
        lengths: the lengths to evaluate, keys of `files_by_length`.
        batch_size: examples per batch.

    Returns:
        `{length: {"loss": ..., "perplexity": ...}}`.

    Example:
    >>> heldout_losses(model, data.eval_files, data.vocab_file, [64, 128])  # doctest: +SKIP
    """
    import keras
    import tensorflow as tf

    datasets = {}
    for length in lengths:
        files = files_by_length[length]
        files = (files,) if isinstance(files, str) else tuple(files)
        datasets[length] = _heldout_dataset(
            files, vocab_file, length, batch_size
        )
    loss_fn = keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, reduction="sum"
    )
    # A graph per batch: run eagerly, a small model's evaluation costs
    # several times its compute in Python dispatch. Traced once for every
    # length and the smaller last batch (no dimension fixed).
    spec = tf.nest.map_structure(
        lambda s: tf.TensorSpec([None] * s.shape.rank, s.dtype),
        datasets[lengths[0]].element_spec,
    )

    @tf.function(input_signature=spec)
    def batch_loss(features, ids, weights):
        logits = model(features, training=False)
        return loss_fn(ids, logits, sample_weight=weights), tf.reduce_sum(
            weights
        )

    return {
        length: _mean_loss(batch_loss, dataset, files_by_length[length])
        for length, dataset in datasets.items()
    }


def _mean_loss(batch_loss, dataset, files):
    """Mean loss per masked token of `batch_loss` over `dataset`."""
    total, count = 0.0, 0.0
    for features, ids, weights in dataset:
        batch_total, batch_count = batch_loss(features, ids, weights)
        total += float(batch_total)
        count += float(batch_count)
    if not count:
        raise ValueError(f"No masked tokens in {files}.")
    loss = total / count
    return {"loss": loss, "perplexity": math.exp(min(loss, 50.0))}
