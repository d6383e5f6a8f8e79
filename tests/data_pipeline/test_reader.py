"""pretraining_dataset: schema, masking, determinism, sharding, bad shards."""

import os

import numpy as np
import pytest
import tensorflow as tf

from data_pipeline import check_shards_vocabulary
from data_pipeline import pretraining_dataset
from data_pipeline import read_manifest
from data_pipeline import reader
from data_pipeline import verify_shards
from data_pipeline import vocab as vocab_lib
from tests.data_pipeline import conftest
from tests.sizes import encoder_sizes
from tupe_tf.utils.errors import UserError

SEQ = conftest.TEST_SEQ_LENGTH


def _numpy(batch):
    features, mask_ids, weights = batch
    out = {k: v.numpy() for k, v in features.items()}
    out["mask_ids"] = mask_ids.numpy()
    out["weights"] = weights.numpy()
    return out


def _take(ds, n):
    return [_numpy(b) for b in ds.take(n)]


def test_element_spec_is_static_and_keras_hub_shaped(
    dynamic_shards, vocab_file
):
    directory, _ = dynamic_shards
    ds = pretraining_dataset(
        directory, vocab_file, seq_length=SEQ, batch_size=4
    )
    features, mask_ids, weights = ds.element_spec
    p = round(0.15 * SEQ)
    assert set(features) == {
        "token_ids",
        "segment_ids",
        "padding_mask",
        "mask_positions",
    }
    for key in ("token_ids", "segment_ids", "padding_mask"):
        assert (
            features[key].shape == (4, SEQ) and features[key].dtype == tf.int32
        )
    assert features["mask_positions"].shape == (4, p)
    assert mask_ids.shape == (4, p) and mask_ids.dtype == tf.int32
    assert weights.shape == (4, p) and weights.dtype == tf.float32


def test_dynamic_masking_statistics(dynamic_shards, vocab_file):
    directory, manifest = dynamic_shards
    vocab = vocab_lib.load_vocabulary(vocab_file)
    special = np.array(vocab.special_token_ids)
    ds = pretraining_dataset(
        directory,
        vocab_file,
        seq_length=SEQ,
        batch_size=32,
        is_training=False,
        drop_remainder=False,
        seed=1,
    )
    batches = _take(ds, 1000)
    assert sum(len(b["token_ids"]) for b in batches) == manifest["num_examples"]
    chosen_total = candidates_total = 0
    new_values, labels = [], []
    for b in batches:
        rows, slots = np.nonzero(b["weights"])
        positions = b["mask_positions"][rows, slots]
        label = b["mask_ids"][rows, slots]
        assert not np.isin(label, special).any()  # never [CLS]/[SEP]/[PAD]
        assert np.all(b["padding_mask"][rows, positions] == 1)
        new_values.append(b["token_ids"][rows, positions])
        labels.append(label)
        # Candidates: real non-special tokens (masked ones counted as original).
        original = b["token_ids"].copy()
        original[rows, positions] = label
        assert np.all(original[:, 0] == vocab.special_ids.cls)
        candidates_total += np.sum(
            (b["padding_mask"] == 1) & ~np.isin(original, special)
        )
        chosen_total += len(rows)
        assert np.all(
            b["token_ids"][b["padding_mask"] == 0] == vocab.special_ids.pad
        )
        assert np.all(b["segment_ids"] == 0)
    new_values = np.concatenate(new_values)
    labels = np.concatenate(labels)
    assert 0.13 < chosen_total / candidates_total < 0.17
    frac_mask = np.mean(new_values == vocab.special_ids.mask)
    frac_random = np.mean(
        (new_values != vocab.special_ids.mask) & (new_values != labels)
    )
    assert 0.74 < frac_mask < 0.86
    assert 0.05 < frac_random < 0.15
    replaced = new_values[new_values != vocab.special_ids.mask]
    assert not np.isin(replaced, special).any()


def test_deterministic_mode_and_resumption(dynamic_shards, vocab_file):
    directory, _ = dynamic_shards
    kwargs = dict(
        seq_length=SEQ,
        batch_size=8,
        deterministic=True,
        seed=11,
        shuffle_buffer=50,
    )
    a = _take(pretraining_dataset(directory, vocab_file, **kwargs), 30)
    b = _take(pretraining_dataset(directory, vocab_file, **kwargs), 30)
    for x, y in zip(a, b):
        for key in x:
            np.testing.assert_array_equal(x[key], y[key])
    c = _take(
        pretraining_dataset(directory, vocab_file, **{**kwargs, "seed": 12}), 3
    )
    assert not np.array_equal(a[0]["token_ids"], c[0]["token_ids"])
    # Resuming after 20 batches gives batches 20.. again.
    resumed = _take(
        pretraining_dataset(directory, vocab_file, skip_batches=20, **kwargs),
        10,
    )
    skipped = _take(
        pretraining_dataset(directory, vocab_file, **kwargs).skip(20), 10
    )
    for x, y, z in zip(resumed, skipped, a[20:]):
        for key in x:
            np.testing.assert_array_equal(x[key], z[key])
            np.testing.assert_array_equal(y[key], z[key])


def test_training_repeats_and_remasks(dynamic_shards, vocab_file):
    directory, manifest = dynamic_shards
    n = manifest["num_examples"]
    ds = pretraining_dataset(
        directory,
        vocab_file,
        seq_length=SEQ,
        batch_size=n,
        deterministic=True,
        shuffle_buffer=1,
    )
    epochs = _take(ds, 2)  # shuffle_buffer=1: only the file order is shuffled.
    for epoch in epochs:
        assert len(epoch["token_ids"]) == n
    masked_by_sequence = [
        {tuple(u): tuple(m) for u, m in zip(_unmask(e), e["token_ids"])}
        for e in epochs
    ]
    assert masked_by_sequence[0].keys() == masked_by_sequence[1].keys()
    remasked = sum(
        masked_by_sequence[0][k] != masked_by_sequence[1][k]
        for k in masked_by_sequence[0]
    )
    assert remasked > 0.9 * n  # dynamic masking: new masks every epoch


def _unmask(batch):
    ids = batch["token_ids"].copy()
    rows, slots = np.nonzero(batch["weights"])
    ids[rows, batch["mask_positions"][rows, slots]] = batch["mask_ids"][
        rows, slots
    ]
    return ids


def test_input_context_shards_files(dynamic_shards, vocab_file):
    directory, manifest = dynamic_shards
    seen = []
    for pipeline in range(2):
        context = tf.distribute.InputContext(
            num_input_pipelines=2,
            input_pipeline_id=pipeline,
            num_replicas_in_sync=2,
        )
        ds = pretraining_dataset(
            directory,
            vocab_file,
            seq_length=SEQ,
            batch_size=1,
            is_training=False,
            input_context=context,
        )
        seen.append({tuple(x) for b in _take(ds, 10_000) for x in _unmask(b)})
    assert not seen[0] & seen[1]
    assert len(seen[0]) + len(seen[1]) == manifest["num_examples"]


def test_input_context_shards_examples_with_few_files(
    tmp_path, corpus_file, vocab_file
):
    from data_pipeline import shards

    out = tmp_path / "one"
    manifest = shards.build_shards(
        conftest.shard_config(corpus_file, vocab_file, out, num_shards=1)
    )
    counts = []
    for pipeline in range(3):
        context = tf.distribute.InputContext(3, pipeline, 3)
        ds = pretraining_dataset(
            str(out),
            vocab_file,
            seq_length=SEQ,
            batch_size=1,
            is_training=False,
            input_context=context,
        )
        counts.append(sum(1 for _ in ds))
    assert sum(counts) == manifest["num_examples"]
    assert max(counts) - min(counts) <= 1


def test_static_shards_and_padding_to_longer_seq(static_shards, vocab_file):
    directory, manifest = static_shards
    ds = pretraining_dataset(
        directory,
        vocab_file,
        seq_length=SEQ + 16,
        batch_size=4,
        is_training=False,
        max_predictions_per_seq=8,
    )
    b = _take(ds, 1)[0]
    assert b["token_ids"].shape == (4, SEQ + 16)
    assert b["mask_positions"].shape == (4, 8)
    assert np.all(b["padding_mask"][:, SEQ:] == 0)
    assert np.all(b["weights"][:, 6:] == 0)
    assert b["weights"].sum() > 0
    # The stored masks are used as they are.
    files = [os.path.join(directory, s["name"]) for s in manifest["shards"]]
    first = tf.train.Example.FromString(
        next(iter(tf.data.TFRecordDataset(files[0]))).numpy()
    )
    stored = first.features.feature["masked_lm_positions"].int64_list.value
    assert b["mask_positions"][0, :6].tolist() == list(stored)
    with pytest.raises(ValueError, match="max_predictions_per_seq"):
        pretraining_dataset(
            directory,
            vocab_file,
            seq_length=SEQ,
            batch_size=4,
            max_predictions_per_seq=3,
        )


def test_seq_length_shorter_than_shards(dynamic_shards, vocab_file):
    directory, _ = dynamic_shards
    with pytest.raises(ValueError, match=f"max_seq_length={SEQ}"):
        pretraining_dataset(
            directory, vocab_file, seq_length=SEQ - 1, batch_size=2
        )


def test_vocabulary_mismatch_names_both_files(dynamic_shards, tmp_path):
    directory, _ = dynamic_shards
    other = conftest.write_vocab(
        tmp_path / "other_vocab.txt",
        tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "x", "y"],
    )
    for call in (
        lambda: check_shards_vocabulary(directory, other),
        lambda: pretraining_dataset(directory, other, SEQ, 2),
    ):
        with pytest.raises(ValueError, match="other_vocab.txt") as info:
            call()
        assert "manifest.json" in str(info.value)
        assert "vocab.txt" in str(info.value)


def test_globs_manifest_and_foreign_files(shard_copy, vocab_file):
    check = check_shards_vocabulary(os.path.join(shard_copy, "*"), vocab_file)
    assert len(check.files) == 3 and not check.bad_shards
    assert read_manifest(shard_copy)["schema"] == "dynamic"
    foreign = os.path.join(shard_copy, "extra.tfrecord")
    open(foreign, "wb").close()
    with pytest.raises(ValueError, match="extra.tfrecord.*not listed"):
        verify_shards(os.path.join(shard_copy, "*.tfrecord"))
    os.remove(os.path.join(shard_copy, "manifest.json"))
    with pytest.raises(FileNotFoundError, match="manifest"):
        read_manifest(shard_copy)
    with pytest.raises(FileNotFoundError, match="manifest"):
        pretraining_dataset(shard_copy, vocab_file, SEQ, 2)


def _shard_path(directory, index=1):
    return os.path.join(
        directory, read_manifest(directory)["shards"][index]["name"]
    )


def test_truncated_shard_named_or_skipped(shard_copy, vocab_file, caplog):
    bad = _shard_path(shard_copy)
    data = open(bad, "rb").read()
    with open(bad, "wb") as f:
        f.write(data[: len(data) // 2])
    with pytest.raises(ValueError, match=os.path.basename(bad)):
        pretraining_dataset(shard_copy, vocab_file, SEQ, 2)
    check = verify_shards(shard_copy)
    assert [p for p, _ in check.bad_shards] == [bad]
    ds = pretraining_dataset(
        shard_copy, vocab_file, SEQ, 1, is_training=False, skip_bad_shards=True
    )
    manifest = read_manifest(shard_copy)
    good = (
        sum(s["examples"] for s in manifest["shards"])
        - manifest["shards"][1]["examples"]
    )
    assert sum(1 for _ in ds) == good
    assert "Skipping 1 bad shard(s) of 3" in caplog.text


def _corrupt_a_shard(directory):
    """Flips a byte in the middle of a shard (same size: it passes the
    size check); returns its path."""
    bad = _shard_path(directory)
    data = bytearray(open(bad, "rb").read())
    data[len(data) // 2] ^= 0xFF
    open(bad, "wb").write(bytes(data))
    return bad


def test_corrupted_shard_named_at_read_time(shard_copy, vocab_file):
    bad = _corrupt_a_shard(shard_copy)
    ds = pretraining_dataset(shard_copy, vocab_file, SEQ, 1, is_training=False)
    with pytest.raises(
        tf.errors.InvalidArgumentError, match=os.path.basename(bad)
    ):
        for _ in ds:
            pass
    check = verify_shards(shard_copy, verify="full")
    assert [p for p, _ in check.bad_shards] == [bad]
    assert "unreadable" in check.bad_shards[0][1]
    # Skipping: the corrupted shard is dropped before reading.
    ds = pretraining_dataset(
        shard_copy,
        vocab_file,
        SEQ,
        1,
        is_training=False,
        skip_bad_shards=True,
        verify="full",
    )
    assert sum(1 for _ in ds) > 0
    # Skipping without a full check: the rest of the shard is dropped.
    ds = pretraining_dataset(
        shard_copy, vocab_file, SEQ, 1, is_training=False, skip_bad_shards=True
    )
    assert sum(1 for _ in ds) > 0


def test_bad_shard_error_is_given_back_typed(shard_copy, vocab_file):
    bad = _corrupt_a_shard(shard_copy)
    ds = pretraining_dataset(shard_copy, vocab_file, SEQ, 1, is_training=False)
    with pytest.raises(tf.errors.InvalidArgumentError) as raised:
        for _ in ds:
            pass
    error = reader.BadShardError.from_op_error(raised.value)
    assert isinstance(error, UserError)
    assert str(error).startswith(f"Shard {bad} is truncated or corrupted")
    assert str(error).endswith(f"pass {reader.SKIP_OVERRIDE}.")
    other = tf.errors.InvalidArgumentError(None, None, "assertion failed: [x]")
    assert reader.BadShardError.from_op_error(other) is None


def test_missing_shard(shard_copy, vocab_file):
    bad = _shard_path(shard_copy, 0)
    os.remove(bad)
    with pytest.raises(ValueError, match=os.path.basename(bad) + ": missing"):
        pretraining_dataset(shard_copy, vocab_file, SEQ, 2)


def test_gzip_shards_round_trip(
    tmp_path, corpus_file, vocab_file, dynamic_shards
):
    from data_pipeline import shards

    out = tmp_path / "gz"
    shards.build_shards(
        conftest.shard_config(
            corpus_file, vocab_file, out, num_shards=3, compression="gzip"
        )
    )
    kwargs = dict(
        seq_length=SEQ,
        batch_size=4,
        is_training=False,
        seed=3,
        deterministic=True,
    )
    a = _take(pretraining_dataset(str(out), vocab_file, **kwargs), 5)
    b = _take(pretraining_dataset(dynamic_shards[0], vocab_file, **kwargs), 5)
    for x, y in zip(a, b):
        for key in x:
            np.testing.assert_array_equal(x[key], y[key])


@pytest.mark.large
def test_keras_hub_bert_masked_lm_fits(dynamic_shards, vocab_file):
    import keras_hub  # pylint: disable=g-import-not-at-top

    directory, _ = dynamic_shards
    vocab = vocab_lib.load_vocabulary(vocab_file)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=vocab.size,
        max_sequence_length=SEQ,
        **encoder_sizes(16, num_layers=1),
    )
    model = keras_hub.models.BertMaskedLM(backbone, preprocessor=None)
    model.compile(optimizer="adam", weighted_metrics=[])
    ds = pretraining_dataset(
        directory, vocab_file, seq_length=SEQ, batch_size=8, seed=0
    )
    history = model.fit(ds, steps_per_epoch=3, epochs=1, verbose=0)
    loss = history.history["loss"][0]
    assert np.isfinite(loss) and loss > 0
