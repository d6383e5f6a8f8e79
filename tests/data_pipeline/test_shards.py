"""Shard building: contents, schemas, manifest, determinism, bad input."""

import os
import re

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text as tf_text

from data_pipeline import corpus as corpus_lib
from data_pipeline import manifest as manifest_lib
from data_pipeline import shard_serialization
from data_pipeline import shards
from data_pipeline import vocab as vocab_lib
from tests.data_pipeline import conftest
from tupe_tf.utils import fileio
from tupe_tf.utils.errors import UserError

SEQ = conftest.TEST_SEQ_LENGTH


def _records(directory, manifest):
    files = [os.path.join(directory, s["name"]) for s in manifest["shards"]]
    return [
        tf.train.Example.FromString(r.numpy())
        for r in tf.data.TFRecordDataset(
            files, compression_type=manifest["compression"]
        )
    ]


def _config(corpus_file, vocab_file, output_dir, **kwargs):
    kwargs.setdefault("num_shards", 3)
    return conftest.shard_config(corpus_file, vocab_file, output_dir, **kwargs)


def test_dynamic_shards_hold_the_whole_tokenized_corpus(
    dynamic_shards, corpus_file, vocab_file
):
    directory, manifest = dynamic_shards
    # Read shard by shard, then undo the round-robin to get corpus order.
    per_shard = []
    for entry in manifest["shards"]:
        path = os.path.join(directory, entry["name"])
        per_shard.append(
            [
                list(
                    tf.train.Example.FromString(r.numpy())
                    .features.feature["input_word_ids"]
                    .int64_list.value
                )
                for r in tf.data.TFRecordDataset(path)
            ]
        )
        assert len(per_shard[-1]) == entry["examples"]
    sequences = [
        per_shard[i % 3][i // 3] for i in range(manifest["num_examples"])
    ]
    vocab = vocab_lib.load_vocabulary(vocab_file)
    special = vocab.special_ids
    stream = []
    for seq in sequences:
        assert seq[0] == special.cls and seq[-1] == special.sep
        assert len(seq) <= SEQ
        stream += [t for t in seq[1:-1] if t != special.sep]
    # Reference: TF-Text's BertTokenizer on every line, in order.
    lines = [
        l for l in open(corpus_file, encoding="utf-8").read().split("\n") if l
    ]
    reference = tf_text.BertTokenizer(vocab_file, token_out_type=tf.int64)
    expected = reference.tokenize(lines).merge_dims(1, 2).flat_values.numpy()
    assert stream == expected.tolist()
    assert vocab.special_ids.unk not in stream
    assert manifest["stats"]["text_tokens"] == len(expected)
    # One boundary [SEP] per document boundary that falls inside a sequence.
    inner_seps = sum(seq[1:-1].count(special.sep) for seq in sequences)
    assert 0 < inner_seps <= manifest["stats"]["documents"] - 1
    fill = sum(map(len, sequences)) / (len(sequences) * SEQ)
    assert manifest["stats"]["fill_ratio"] == pytest.approx(fill, abs=1e-5)
    assert fill > 0.7  # short 32-token blocks; ~0.88 at 128 on Wikipedia


def test_manifest_fields(dynamic_shards, vocab_file, corpus_file):
    directory, manifest = dynamic_shards
    on_disk = manifest_lib.read_manifest(directory)
    vocab = vocab_lib.load_vocabulary(vocab_file)
    assert on_disk["vocab"]["sha256"] == vocab.sha256
    assert on_disk["vocab"]["size"] == vocab.size
    assert on_disk["lowercase"] is False
    assert on_disk["max_seq_length"] == SEQ
    assert on_disk["schema"] == "dynamic"
    assert on_disk["features"] == ["input_word_ids"]
    assert on_disk["seed"] == 7
    assert on_disk["sources"] == [
        {"path": corpus_file, "bytes": os.path.getsize(corpus_file)}
    ]
    # tupe_tf/version.py, read as text (importing tupe_tf is heavy).
    version_file = os.path.join(
        os.path.dirname(
            os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        ),
        "tupe_tf",
        "version.py",
    )
    version = re.search(
        r'__version__ = "([^"]+)"', open(version_file).read()
    ).group(1)
    assert on_disk["package_version"] == version
    for entry in on_disk["shards"]:
        path = os.path.join(directory, entry["name"])
        assert entry["bytes"] == os.path.getsize(path)
        assert entry["sha256"] == fileio.file_sha256(path)
    assert (
        sum(s["examples"] for s in on_disk["shards"]) == on_disk["num_examples"]
    )
    assert sorted(os.listdir(directory)) == sorted(
        [s["name"] for s in on_disk["shards"]] + ["manifest.json"]
    )


def _model_garden_spec(seq_length, max_predictions):
    """Model Garden's BERT pre-training loader feature spec (v1 names,
    with next-sentence labels)."""
    return {
        "input_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
        "input_mask": tf.io.FixedLenFeature([seq_length], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
        "masked_lm_positions": tf.io.FixedLenFeature(
            [max_predictions], tf.int64
        ),
        "masked_lm_ids": tf.io.FixedLenFeature([max_predictions], tf.int64),
        "masked_lm_weights": tf.io.FixedLenFeature(
            [max_predictions], tf.float32
        ),
        "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
    }


def test_static_shards_model_garden_schema(static_shards, vocab_file):
    directory, manifest = static_shards
    assert manifest["schema"] == "static"
    assert manifest["static_masking"] == {
        "dupe_factor": 2,
        "max_predictions_per_seq": 6,
        "mask_rate": 0.15,
    }
    files = [os.path.join(directory, s["name"]) for s in manifest["shards"]]
    spec = _model_garden_spec(SEQ, 6)
    parsed = next(
        iter(
            tf.data.TFRecordDataset(files)
            .batch(10_000)
            .map(lambda x: tf.io.parse_example(x, spec))
        )
    )
    parsed = {k: v.numpy() for k, v in parsed.items()}
    n = len(parsed["input_ids"])
    assert n == manifest["num_examples"]
    vocab = vocab_lib.load_vocabulary(vocab_file)
    rows = np.arange(n)[:, None]
    weights = parsed["masked_lm_weights"]
    at_positions = parsed["input_ids"][rows, parsed["masked_lm_positions"]]
    labels = parsed["masked_lm_ids"]
    assert np.all(parsed["input_mask"][:, 0] == 1)
    assert np.all(
        parsed["input_ids"][parsed["input_mask"] == 0] == vocab.special_ids.pad
    )
    assert not np.isin(labels[weights > 0], vocab.special_token_ids).any()
    frac_mask = np.mean(at_positions[weights > 0] == vocab.special_ids.mask)
    assert 0.65 < frac_mask < 0.95
    # dupe_factor=2: each packed sequence twice in a row, with other masks.
    unmasked = parsed["input_ids"].copy()
    unmasked[rows, parsed["masked_lm_positions"]] = np.where(
        weights > 0, labels, unmasked[rows, parsed["masked_lm_positions"]]
    )
    counts = [s["examples"] for s in manifest["shards"]]
    starts = np.cumsum([0] + counts[:-1])
    order = [starts[i % 3] + i // 3 for i in range(n)]  # undo round-robin
    unmasked = unmasked[order]
    masked = parsed["input_ids"][order]
    assert n % 2 == 0
    np.testing.assert_array_equal(unmasked[0::2], unmasked[1::2])
    assert np.mean(np.any(masked[0::2] != masked[1::2], axis=1)) > 0.9
    assert len({tuple(r) for r in unmasked}) == n // 2


def _model_garden_pretrain_batches(pattern, seq_length, max_predictions, batch):
    """The batches Model Garden's BERT pre-training loader
    (`official.nlp.data.pretrain_dataloader.BertPretrainDataLoader`, v1
    feature names, next-sentence labels, not training) makes of `pattern`,
    by its steps written out here (tf-models-official pins another
    TensorFlow): parse each record with its feature spec, every int64
    cast to int32, the features renamed to the model's inputs, and
    batches with the remainder dropped."""
    spec = _model_garden_spec(seq_length, max_predictions)
    names = {"input_ids": "input_word_ids", "segment_ids": "input_type_ids"}

    def decode(record):
        example = tf.io.parse_single_example(record, spec)
        return {
            names.get(k, k): tf.cast(v, tf.int32) if v.dtype == tf.int64 else v
            for k, v in example.items()
        }

    files = sorted(tf.io.gfile.glob(pattern))
    return (
        tf.data.TFRecordDataset(files)
        .map(decode)
        .batch(batch, drop_remainder=True)
    )


def test_model_garden_loader_reads_static_shards(static_shards):
    directory, manifest = static_shards
    pattern = os.path.join(directory, "*.tfrecord")
    batch = next(iter(_model_garden_pretrain_batches(pattern, SEQ, 6, 4)))
    assert set(batch) == {
        "input_word_ids",
        "input_mask",
        "input_type_ids",
        "masked_lm_positions",
        "masked_lm_ids",
        "masked_lm_weights",
        "next_sentence_labels",
    }
    shapes = {k: (tuple(v.shape), v.dtype) for k, v in batch.items()}
    assert shapes == {
        "input_word_ids": ((4, SEQ), tf.int32),
        "input_mask": ((4, SEQ), tf.int32),
        "input_type_ids": ((4, SEQ), tf.int32),
        "masked_lm_positions": ((4, 6), tf.int32),
        "masked_lm_ids": ((4, 6), tf.int32),
        "masked_lm_weights": ((4, 6), tf.float32),
        "next_sentence_labels": ((4, 1), tf.int32),
    }
    # The first records of the first shard, as the shard holds them.
    first = os.path.join(directory, manifest["shards"][0]["name"])
    raw = [
        tf.train.Example.FromString(r.numpy()).features.feature
        for r in tf.data.TFRecordDataset(first).take(4)
    ]
    np.testing.assert_array_equal(
        batch["input_word_ids"].numpy(),
        [f["input_ids"].int64_list.value for f in raw],
    )
    np.testing.assert_array_equal(
        batch["masked_lm_weights"].numpy(),
        [f["masked_lm_weights"].float_list.value for f in raw],
    )
    assert float(tf.reduce_sum(batch["masked_lm_weights"])) > 0
    # Every masked position is inside its sequence's tokens.
    positions = batch["masked_lm_positions"].numpy()
    weights = batch["masked_lm_weights"].numpy()
    mask = batch["input_mask"].numpy()
    rows = np.arange(4)[:, None].repeat(6, 1)
    assert np.all(mask[rows, positions][weights > 0] == 1)


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"static_masking": True, "dupe_factor": 2, "compression": "gzip"}],
)
def test_byte_identical_rebuilds(tmp_path, corpus_file, vocab_file, kwargs):
    a = shards.build_shards(
        _config(corpus_file, vocab_file, tmp_path / "a", seed=3, **kwargs)
    )
    b = shards.build_shards(
        _config(corpus_file, vocab_file, tmp_path / "b", seed=3, **kwargs)
    )
    assert [s["sha256"] for s in a["shards"]] == [
        s["sha256"] for s in b["shards"]
    ]
    assert (tmp_path / "a" / "manifest.json").read_bytes() == (
        tmp_path / "b" / "manifest.json"
    ).read_bytes()
    if kwargs:
        c = shards.build_shards(
            _config(corpus_file, vocab_file, tmp_path / "c", seed=4, **kwargs)
        )
        assert [s["sha256"] for s in a["shards"]] != [
            s["sha256"] for s in c["shards"]
        ]


def test_one_serializer_per_setting_traced_once(tmp_path, vocab_file):
    vocab = vocab_lib.load_vocabulary(vocab_file)
    other_vocab = vocab_lib.load_vocabulary(
        conftest.write_vocab(
            tmp_path / "other.txt", tokens=list(vocab.tokens) + ["zebra"]
        )
    )

    def serializer(vocabulary=vocab, **fields):
        config = shards.ShardConfig(
            vocab_file=vocab_file,
            output_dir="unused",
            **{
                "max_seq_length": 16,
                "max_predictions_per_seq": 4,
                "static_masking": True,
                **fields,
            },
        )
        return shard_serialization.make_chunk_serializer(config, vocabulary)

    first = serializer()
    ids = np.full([3, 16], vocab.special_ids.pad, np.int32)
    lengths = np.array([2, 5, 16], np.int32)
    for chunk_index in range(3):
        first(ids, lengths, np.int64(chunk_index))
    # A second build with the same settings (a Beam worker's next
    # partition) reuses the traced function.
    assert serializer() is first
    assert first.experimental_get_tracing_count() == 1
    others = [
        serializer(seed=7),
        serializer(dupe_factor=3),
        serializer(mask_rate=0.2),
        serializer(max_predictions_per_seq=5),
        serializer(max_seq_length=32),
        serializer(other_vocab),
        serializer(static_masking=False),
    ]
    assert len({id(f) for f in [first] + others}) == 8


def test_serialization_order_does_not_depend_on_worker_threads(vocab_file):
    vocab = vocab_lib.load_vocabulary(vocab_file)
    rng = np.random.default_rng(0)
    sequences = [
        np.concatenate(
            [
                [vocab.special_ids.cls],
                rng.integers(5, vocab.size, n),
                [vocab.special_ids.sep],
            ]
        ).astype(np.int32)
        for n in rng.integers(1, SEQ - 1, 200)
    ]
    config = shards.ShardConfig(
        vocab_file=vocab_file,
        output_dir="unused",
        max_seq_length=SEQ,
        static_masking=True,
        dupe_factor=2,
        max_predictions_per_seq=6,
    )
    # 50 chunks of 4 sequences: many in flight on 2 worker threads, vs one
    # at a time.
    concurrent = list(
        shard_serialization.serialized_examples(
            sequences, config, vocab, chunk_size=4, max_chunks_in_flight=8
        )
    )
    sequential = list(
        shard_serialization.serialized_examples(
            sequences, config, vocab, chunk_size=4, max_chunks_in_flight=1
        )
    )
    assert concurrent == sequential and len(concurrent) == 400
    for i, record in enumerate(concurrent):
        example = tf.train.Example.FromString(record).features.feature
        mask = np.array(example["input_mask"].int64_list.value)
        ids = np.array(example["input_ids"].int64_list.value)
        original = sequences[i // 2]
        assert mask.sum() == len(original)
        unmasked = ids.copy()
        positions = np.array(example["masked_lm_positions"].int64_list.value)
        weights = np.array(example["masked_lm_weights"].float_list.value)
        labels = np.array(example["masked_lm_ids"].int64_list.value)
        unmasked[positions[weights > 0]] = labels[weights > 0]
        np.testing.assert_array_equal(unmasked[: len(original)], original)
        assert int(weights.sum()) == min(
            6, max(1, int(np.floor(0.15 * (len(original) - 2) + 0.5)))
        )


def test_existing_output_dir_needs_overwrite(tmp_path, corpus_file, vocab_file):
    out = tmp_path / "out"
    shards.build_shards(_config(corpus_file, vocab_file, out, num_shards=4))
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    with pytest.raises(fileio.OutputError, match="--overwrite"):
        shards.build_shards(_config(corpus_file, vocab_file, out, num_shards=2))
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    manifest = shards.build_shards(
        _config(corpus_file, vocab_file, out, num_shards=2, overwrite=True)
    )
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [s["name"] for s in manifest["shards"]] + ["manifest.json"]
    )


def test_interrupted_build_leaves_nothing_complete(
    tmp_path, corpus_file, vocab_file, monkeypatch
):
    real = shard_serialization.serialized_examples

    def failing(sequences, config, vocabulary):
        for i, record in enumerate(
            real(sequences, config, vocabulary, chunk_size=16)
        ):
            if i == 50:
                raise KeyboardInterrupt("simulated interruption")
            yield record

    monkeypatch.setattr(shard_serialization, "serialized_examples", failing)
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        shards.build_shards(_config(corpus_file, vocab_file, out))
    assert not out.exists()  # Created by the build, removed with it.
    with pytest.raises(FileNotFoundError, match="manifest"):
        manifest_lib.read_manifest(str(out))


def test_interrupted_overwrite_keeps_old_shards(
    tmp_path, corpus_file, vocab_file, monkeypatch
):
    out = tmp_path / "out"
    shards.build_shards(_config(corpus_file, vocab_file, out))
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    monkeypatch.setattr(
        fileio,
        "file_sha256",
        lambda path: (_ for _ in ()).throw(OSError("disk")),
    )
    with pytest.raises(OSError):
        shards.build_shards(
            _config(corpus_file, vocab_file, out, overwrite=True)
        )
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_empty_corpus(tmp_path, vocab_file):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n \n")
    with pytest.raises(ValueError, match="Empty corpus.*empty.txt"):
        shards.build_shards(_config(str(empty), vocab_file, tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_missing_input_and_bad_vocab(tmp_path, corpus_file, vocab_file):
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        shards.build_shards(
            _config(str(tmp_path / "missing.txt"), vocab_file, tmp_path / "o1")
        )
    bad_vocab = conftest.write_vocab(tmp_path / "bad.txt", drop=("[SEP]",))
    with pytest.raises(ValueError, match=r"bad.txt.*\[SEP\]"):
        shards.build_shards(_config(corpus_file, bad_vocab, tmp_path / "o2"))
    assert not os.path.exists(tmp_path / "o1")
    assert not os.path.exists(tmp_path / "o2")


@pytest.mark.parametrize(
    "field,value",
    [
        ("max_seq_length", 4),
        ("num_shards", 0),
        ("dupe_factor", 2),
        ("compression", "zip"),
        ("mask_rate", 1.5),
    ],
)
def test_bad_config_names_the_field(
    tmp_path, corpus_file, vocab_file, field, value
):
    with pytest.raises(ValueError, match=field):
        shards.build_shards(
            _config(corpus_file, vocab_file, tmp_path / "o", **{field: value})
        )


def test_non_utf8_and_huge_line(tmp_path, vocab_file):
    corpus = tmp_path / "messy.txt"
    huge = " ".join(
        conftest.WORDS[i % len(conftest.WORDS)] for i in range(1_800_000)
    )  # > 10 MB on one line
    corpus.write_bytes(
        b"the dog \xff\xfe barks\n\n" + huge.encode() + b"\nthe end.\n"
    )
    assert os.path.getsize(corpus) > 10_000_000
    manifest = shards.build_shards(
        _config(
            str(corpus),
            vocab_file,
            tmp_path / "out",
            max_seq_length=128,
            num_shards=2,
            # 1 of its 3 lines is not UTF-8: over the default share.
            max_invalid_line_fraction=1,
        )
    )
    stats = manifest["stats"]
    assert stats["corpus"]["invalid_utf8_lines"] == 1
    assert stats["corpus"]["long_lines_split"] == 1
    # Every word of the huge line is one token; nothing lost.
    vocab = list(vocab_lib.load_vocabulary(vocab_file).tokens)
    others = (
        tf_text.FastBertTokenizer(vocab)
        .tokenize(["the dog \ufffd\ufffd barks", "the end."])
        .flat_values.shape[0]
    )
    assert stats["text_tokens"] == 1_800_000 + others
    assert stats["unk_tokens"] >= 1  # the replacement characters
    assert stats["fill_ratio"] > 0.99


def test_gzip_and_bz2_inputs(tmp_path, corpus_file, vocab_file):
    import bz2
    import gzip

    text = open(corpus_file, "rb").read()
    with gzip.open(tmp_path / "c.gz", "wb") as f:
        f.write(text)
    with bz2.open(tmp_path / "c.bz2", "wb") as f:
        f.write(text)
    plain = shards.build_shards(
        _config(corpus_file, vocab_file, tmp_path / "p")
    )
    for name in ("c.gz", "c.bz2"):
        other = shards.build_shards(
            _config(
                str(tmp_path / name),
                vocab_file,
                tmp_path / name.replace(".", "_"),
            )
        )
        assert [s["sha256"] for s in other["shards"]] == [
            s["sha256"] for s in plain["shards"]
        ]


def test_embedded_corpus_is_the_default(tmp_path, monkeypatch):
    from data_pipeline import corpus

    small = tmp_path / "small.txt"
    small.write_text("the dog.\n\nthe cat.\n")
    monkeypatch.setattr(corpus, "embedded_corpus_path", lambda: str(small))
    vocab = conftest.write_vocab(tmp_path / "v.txt")
    manifest = shards.build_shards(
        shards.ShardConfig(
            vocab_file=vocab, output_dir=str(tmp_path / "o"), num_shards=1
        )
    )
    assert manifest["sources"][0]["path"] == str(small)


def test_a_read_error_comes_out_after_the_batches_before_it(vocab_file):
    """The generator's own exception, after what it read before failing,
    and no TensorFlow error on the way."""
    vocabulary = vocab_lib.load_vocabulary(vocab_file)

    def line_batches():
        for _ in range(3):
            yield ["the cat sat", "on the mat"], [0, 0]
        raise UserError("bad input.txt")

    batches = shards.tokenized_line_batches(
        [],
        vocabulary,
        lowercase=True,
        stats=corpus_lib.CorpusStats(),
        line_batches=line_batches(),
    )
    received = []
    with pytest.raises(UserError, match="bad input.txt"):
        for flat_ids, row_splits, kinds in batches:
            received.append(len(row_splits) - 1)
    assert received == [2, 2, 2]
