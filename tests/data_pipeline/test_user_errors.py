"""The library's refusals of user input are `UserError`s (what the scripts'
runner turns into one `ERROR:` line), and the GLUE task table is the one
that training reads."""

import dataclasses
import sys

import pytest

from data_pipeline import beam_common
from data_pipeline import glue
from data_pipeline import manifest as manifest_lib
from data_pipeline import reader
from data_pipeline import shards
from data_pipeline import vocab as vocab_lib
from tests.data_pipeline import conftest
from tupe_tf.utils import fileio
from tupe_tf.utils.errors import UserError


def _shard_config(tmp_path, vocab_file, **fields):
    return shards.ShardConfig(
        vocab_file=vocab_file, output_dir=str(tmp_path / "out"), **fields
    )


def test_bad_settings_and_files_are_user_errors(tmp_path, vocab_file):
    not_json = tmp_path / "manifest.json"
    not_json.write_text("{not json")
    no_shards = tmp_path / "no_shards"
    no_shards.mkdir()
    cases = [
        (
            lambda: _shard_config(
                tmp_path, vocab_file, num_shards=0
            ).validate(),
            r"--num_shards=0 is out of range: it must be >= 1\.",
        ),
        (
            lambda: vocab_lib.VocabConfig(
                output_file=str(tmp_path / "v.txt"), vocab_size=3
            ).validate(),
            r"--vocab_size=3 is out of range: it must be >= 6\.",
        ),
        (
            lambda: manifest_lib.read_manifest(str(tmp_path)),
            r"Manifest .*manifest\.json is not valid JSON",
        ),
        (
            lambda: beam_common.check_num_partitions(0),
            "num_partitions must be an int >= 1",
        ),
        (
            lambda: reader.pretraining_dataset(
                str(no_shards), vocab_file, 32, 8
            ),
            r"No manifest\.json in",
        ),
    ]
    for call, message in cases:
        with pytest.raises(UserError, match=message):
            call()


def test_missing_files_are_user_and_file_not_found_errors(
    tmp_path, corpus_file
):
    with pytest.raises(fileio.NoMatchingFileError) as error:
        vocab_lib.load_vocabulary(str(tmp_path / "nope.txt"))
    assert isinstance(error.value, UserError)
    assert isinstance(error.value, FileNotFoundError)
    with pytest.raises(fileio.OutputError, match="not a directory"):
        shards.preflight(
            shards.ShardConfig(
                input_patterns=corpus_file,
                vocab_file=conftest.write_vocab(tmp_path / "vocab.txt"),
                output_dir=corpus_file,
            )
        )


def test_missing_beam_is_a_user_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "apache_beam", None)  # Import fails.
    with pytest.raises(UserError, match=r"^Apache Beam is not installed"):
        beam_common.import_beam()


def test_glue_file_that_is_not_text_names_glue_dir(tmp_path):
    (tmp_path / "SST-2").mkdir()
    (tmp_path / "SST-2" / "train.tsv").write_bytes(
        b"sentence\tlabel\n\xff\t1\n"
    )
    with pytest.raises(
        UserError,
        match=r"^--glue_dir='.*': the GLUE sst2 train file is not UTF-8 text "
        r"\('utf-8' codec can't decode byte 0xff",
    ):
        glue.load_glue("sst2", "train", glue_dir=str(tmp_path))


def test_glue_tasks_are_one_table():
    from tupe_tf.training import config
    from tupe_tf.training import glue_metrics

    assert config.GLUE_TASKS == tuple(glue.GLUE_TASKS)
    (task_field,) = [
        f for f in dataclasses.fields(config.GlueConfig) if f.name == "task"
    ]
    assert task_field.metadata["choices"] == tuple(glue.GLUE_TASKS)
    logits = [[0.2, 0.8, 0.0], [0.9, 0.1, 0.0]]
    for name, task in glue.GLUE_TASKS.items():
        assert task.primary_metric in task.metrics, name
        assert glue_metrics.primary_metric(name) == task.primary_metric
        outputs = [0.5, 0.1] if task.is_regression else logits
        metrics = glue_metrics.compute_glue_metrics(name, [1, 0], outputs)
        assert tuple(metrics) == task.metrics, name
