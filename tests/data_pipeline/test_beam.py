"""Vocabulary and shards on Apache Beam (DirectRunner, in process)."""

import collections
import os
import signal

import pytest

from data_pipeline import beam_shards
from data_pipeline import beam_vocab
from data_pipeline import corpus
from data_pipeline import manifest as manifest_lib
from data_pipeline import shard_outputs
from data_pipeline import shard_verification
from data_pipeline import shards
from data_pipeline import vocab as vocab_lib
from tests import subprocesses
from tests.data_pipeline import conftest
from tests.data_pipeline import test_script_errors
from tests.data_pipeline import test_scripts
from tupe_tf.utils.errors import UserError

pytestmark = pytest.mark.large

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
    settings = {"num_shards": 4, "seed": 7, **kwargs}
    return conftest.shard_config(
        corpus_file, vocab_file, output_dir, **settings
    )


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
    assert (
        shard_verification.verify_shards(
            str(tmp_path / "beam"), "full"
        ).bad_shards
        == []
    )
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
    # No manifest, no shard, no temporary: the directory it created is gone.
    assert not out.exists()
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
    assert not (tmp_path / "e").exists()
    binary = tmp_path / "binary.txt"
    binary.write_bytes(b"the fox \xff\xfe jumps\n\x00\x81 dog\n")
    # Refused as not text by default (see the refusal tests); let through:
    let_through = dict(
        allow_nul_bytes=True, max_invalid_line_fraction=1, max_unk_fraction=1
    )
    single = shards.build_shards(
        _config(str(binary), vocab_file, tmp_path / "s", **let_through)
    )
    beam = beam_shards.build_shards_beam(
        _config(str(binary), vocab_file, tmp_path / "b", **let_through),
        num_partitions=1,
    )
    assert beam["stats"]["corpus"]["invalid_utf8_lines"] == 2
    assert beam["stats"] == single["stats"]
    with pytest.raises(ValueError, match="num_partitions"):
        beam_shards.build_shards_beam(
            _config(str(binary), vocab_file, tmp_path / "p", **let_through),
            num_partitions=5,
        )


# --- refusals: the single-process checks, on Beam ------------------------------


def test_beam_vocabulary_refuses_what_is_not_text(tmp_path, corpus_file):
    binary = conftest.write_binary(tmp_path)
    junk = conftest.write_undecodable(tmp_path)
    out = tmp_path / "new" / "vocab.txt"
    with pytest.raises(UserError, match="ls is not text.*NUL"):
        beam_vocab.build_vocabulary_beam(str(binary), 100, str(out))
    # Found by the workers while they read: reported by the launcher as the
    # reader's error, named, with its figure and flag.
    with pytest.raises(UserError) as error:
        beam_vocab.build_vocabulary_beam(
            f"{corpus_file},{junk}", 100, str(out), num_partitions=2
        )
    message = str(error.value)
    assert str(junk) in message and "(100.0%)" in message
    assert "--max_invalid_line_fraction" in message
    assert not (tmp_path / "new").exists()
    settings = corpus.TextInputSettings(max_invalid_line_fraction=1)
    beam = beam_vocab.build_vocabulary_beam(
        str(junk), 2000, str(out), text_input=settings
    )
    single = vocab_lib.build_vocabulary(
        str(junk), 2000, str(tmp_path / "single.txt"), text_input=settings
    )
    assert beam["sha256"] == single["sha256"]


def test_beam_shards_refuse_what_is_not_text(tmp_path, corpus_file, vocab_file):
    binary = conftest.write_binary(tmp_path)
    junk = conftest.write_undecodable(tmp_path)
    greek = conftest.write_greek(tmp_path)
    out = tmp_path / "out"
    with pytest.raises(UserError, match="ls is not text.*NUL"):
        beam_shards.build_shards_beam(_config(str(binary), vocab_file, out))
    with pytest.raises(UserError) as error:
        beam_shards.build_shards_beam(
            _config(f"{corpus_file},{junk}", vocab_file, out)
        )
    assert str(junk) in str(error.value)
    assert "--max_invalid_line_fraction" in str(error.value)
    with pytest.raises(UserError) as error:
        beam_shards.build_shards_beam(_config(str(greek), vocab_file, out))
    assert "100.0% of the 480 tokens are [UNK]" in str(error.value)
    assert "--max_unk_fraction" in str(error.value)
    assert not out.exists()
    manifest = beam_shards.build_shards_beam(
        _config(str(greek), vocab_file, out, max_unk_fraction=1)
    )
    assert manifest["stats"]["unk_tokens"] == 480


def test_beam_scripts_end_refusals_with_one_error_line(
    tmp_path, corpus_file, vocab_file
):
    junk = conftest.write_undecodable(tmp_path)
    inputs = f"--input={corpus_file},{junk}"
    beam_flags = ("--runner=DirectRunner", "--num_partitions=2")
    result = test_scripts._run(
        "build_shards.py",
        inputs,
        f"--vocab_file={vocab_file}",
        f"--output_dir={tmp_path / 'out'}",
        "--num_shards=2",
        *beam_flags,
    )
    line = test_script_errors.error_line(result, logs=True)
    assert line.startswith(f"ERROR: Input file {junk} is not UTF-8 text: 200")
    result = test_scripts._run(
        "build_vocab.py",
        inputs,
        f"--output={tmp_path / 'v' / 'vocab.txt'}",
        "--vocab_size=100",
        *beam_flags,
    )
    line = test_script_errors.error_line(result, logs=True)
    assert line.startswith(f"ERROR: Input file {junk} is not UTF-8 text: 200")
    assert sorted(os.listdir(tmp_path)) == ["junk.txt"]


def _start_on_a_big_corpus(tmp_path, script, *flags):
    """Starts `script` on two partitions of a large corpus, with `flags`."""
    corpus_file = test_script_errors.big_corpus(tmp_path / "big.txt", 30000)
    return test_script_errors.start_script(
        script,
        f"--input={corpus_file}",
        *flags,
        "--runner=DirectRunner",
        "--num_partitions=2",
    )


def _interrupt_at_work(process, directory, prefix):
    """SIGTERMs `process` once its work directory (a name starting with
    `prefix`) is in `directory`; asserts that it stopped as interrupted."""
    test_script_errors.wait_for_temporaries(
        process, directory, lambda name: name.startswith(prefix)
    )
    subprocesses.interrupt(process, signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    subprocesses.assert_interrupted(process, stderr, signal.SIGTERM)


def test_interrupted_beam_run_publishes_nothing(tmp_path, vocab_file):
    out = tmp_path / "out"
    process = _start_on_a_big_corpus(
        tmp_path,
        "build_shards.py",
        f"--vocab_file={vocab_file}",
        f"--output_dir={out}",
        "--max_seq_length=32",
    )
    _interrupt_at_work(process, out, shard_outputs.BEAM_WORK_DIR_PREFIX)
    assert not out.exists()


def test_interrupted_beam_vocabulary_publishes_nothing(tmp_path):
    out_dir = tmp_path / "v"
    process = _start_on_a_big_corpus(
        tmp_path,
        "build_vocab.py",
        f"--output={out_dir / 'vocab.txt'}",
        "--vocab_size=200",
    )
    # The pipeline's work directory appears in the output's directory.
    _interrupt_at_work(process, out_dir, beam_vocab.WORK_DIR_PREFIX)
    assert not out_dir.exists()


def test_unknown_runner_is_named(tmp_path, corpus_file, vocab_file):
    out = tmp_path / "out"
    with pytest.raises(UserError, match="Unexpected pipeline runner: Nope"):
        beam_shards.build_shards_beam(
            _config(corpus_file, vocab_file, out), runner="Nope"
        )
    with pytest.raises(UserError, match="Unexpected pipeline runner: Nope"):
        beam_vocab.build_vocabulary_beam(
            corpus_file, 100, str(out / "vocab.txt"), runner="Nope"
        )
    assert not out.exists()
