"""Vocabulary and shards on Apache Beam (DirectRunner, in process)."""

import collections
import os

import pytest

from data_pipeline import beam_shards
from data_pipeline import beam_vocab
from data_pipeline import manifest as manifest_lib
from data_pipeline import reader
from data_pipeline import shards
from data_pipeline import vocab as vocab_lib
from tests.data_pipeline import conftest

pytest.importorskip(
    "apache_beam",
    reason="Apache Beam is not installed (pip install 'tupe-tf[beam]'); "
    "CI installs it.",
)


def _records(directory):
    import tensorflow as tf

    manifest = manifest_lib.read_manifest(directory)
    records = []
    for shard in manifest["shards"]:
        path = os.path.join(directory, shard["name"])
        records.extend(
            r.numpy()
            for r in tf.data.TFRecordDataset(
                path, compression_type=manifest["compression"]
            )
        )
    return records


def _config(corpus_file, vocab_file, output_dir, **kwargs):
    settings = dict(
        input_patterns=corpus_file,
        vocab_file=vocab_file,
        output_dir=str(output_dir),
        max_seq_length=conftest.TEST_SEQ_LENGTH,
        num_shards=4,
        seed=7,
    )
    settings.update(kwargs)
    return shards.ShardConfig(**settings)


def _fail_partition_one(partition):
    if partition == 1:
        raise RuntimeError("injected fault in partition 1")


def test_beam_vocabulary_equals_single_process(tmp_path, corpus_file):
    single = vocab_lib.build_vocabulary(
        corpus_file, 120, str(tmp_path / "single.txt"), lowercase=True
    )
    result = beam_vocab.build_vocabulary_beam(
        corpus_file, 120, str(tmp_path / "beam.txt"), True, num_partitions=3
    )
    assert result["sha256"] == single["sha256"]
    assert result["corpus_stats"] == single["corpus_stats"]
    assert result["engine"] == "beam:DirectRunner"
    assert sorted(os.listdir(tmp_path)) == ["beam.txt", "single.txt"]


def test_beam_vocabulary_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        beam_vocab.build_vocabulary_beam(
            str(tmp_path / "missing.txt"), 50, str(tmp_path / "v.txt")
        )
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n  \n")
    with pytest.raises(ValueError, match="Empty corpus.*empty.txt"):
        beam_vocab.build_vocabulary_beam(
            str(empty), 50, str(tmp_path / "v.txt")
        )
    assert sorted(os.listdir(tmp_path)) == ["empty.txt"]


def test_one_partition_is_byte_identical(
    tmp_path, dynamic_shards, corpus_file, vocab_file
):
    single_dir, single = dynamic_shards
    manifest = beam_shards.build_shards_beam(
        _config(corpus_file, vocab_file, tmp_path / "b", num_shards=3),
        num_partitions=1,
    )
    assert [s["sha256"] for s in manifest["shards"]] == [
        s["sha256"] for s in single["shards"]
    ]
    assert manifest["stats"] == single["stats"]
    assert manifest["engine"] == "beam:DirectRunner"
    assert manifest["num_partitions"] == 1
    assert single["engine"] == shards.ENGINE_SINGLE_PROCESS


def test_partitions_hold_the_examples_of_their_documents(
    tmp_path, corpus_file, vocab_file
):
    manifest = beam_shards.build_shards_beam(
        _config(corpus_file, vocab_file, tmp_path / "beam"), num_partitions=2
    )
    assert manifest["num_partitions"] == 2
    assert reader.verify_shards(str(tmp_path / "beam"), "full").bad_shards == []
    # The same documents, split by hand, built in one process each.
    text = open(corpus_file, encoding="utf-8").read()
    documents = text.strip("\n").split("\n\n")
    expected = collections.Counter()
    for partition in range(2):
        part_file = tmp_path / f"part{partition}.txt"
        part_file.write_text(
            "".join(d + "\n\n" for d in documents[partition::2]),
            encoding="utf-8",
        )
        out = tmp_path / f"single{partition}"
        shards.build_shards(_config(str(part_file), vocab_file, out))
        expected.update(_records(str(out)))
    got = collections.Counter(_records(str(tmp_path / "beam")))
    assert got == expected and sum(got.values()) == manifest["num_examples"]


def test_failed_run_publishes_nothing_and_rerun_completes(
    tmp_path, corpus_file, vocab_file
):
    out = tmp_path / "shards"
    config = _config(corpus_file, vocab_file, out)
    with pytest.raises(Exception, match="injected fault"):
        beam_shards.build_shards_beam(
            config, num_partitions=2, partition_hook=_fail_partition_one
        )
    assert os.listdir(out) == []  # No manifest, no shard, no temporary.
    manifest = beam_shards.build_shards_beam(config, num_partitions=2)
    assert sorted(os.listdir(out)) == sorted(
        [s["name"] for s in manifest["shards"]] + ["manifest.json"]
    )


def test_bad_inputs_give_the_single_process_errors(tmp_path, vocab_file):
    config = _config(str(tmp_path / "nope.txt"), vocab_file, tmp_path / "o")
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        beam_shards.build_shards_beam(config)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    with pytest.raises(ValueError, match="Empty corpus.*empty.txt"):
        beam_shards.build_shards_beam(
            _config(str(empty), vocab_file, tmp_path / "e")
        )
    assert os.listdir(tmp_path / "e") == []
    binary = tmp_path / "binary.txt"
    binary.write_bytes(b"the fox \xff\xfe jumps\n\x00\x81 dog\n")
    single = shards.build_shards(
        _config(str(binary), vocab_file, tmp_path / "s")
    )
    beam = beam_shards.build_shards_beam(
        _config(str(binary), vocab_file, tmp_path / "b"), num_partitions=1
    )
    assert beam["stats"]["corpus"]["invalid_utf8_lines"] == 2
    assert beam["stats"] == single["stats"]
    with pytest.raises(ValueError, match="num_partitions"):
        beam_shards.build_shards_beam(
            _config(str(binary), vocab_file, tmp_path / "p"), num_partitions=5
        )
