"""A full disk is one line (`tupe_tf.utils.disk_full`).

ENOSPC is injected into each writer (text and JSON files, the vocabulary,
the shards, a preset or export directory): the writer leaves nothing
half-written, the error names the output, and the scripts' runner turns it
into one `ERROR:` line.
"""

import errno
import os

import pytest
import tensorflow as tf

from tests.utils.test_cli import run_script
from tupe_tf.utils import disk_full
from tupe_tf.utils import fileio

NO_SPACE = "No space left on device"


def enospc(*args):
    raise OSError(errno.ENOSPC, NO_SPACE)


def checkpoint_error(error_class=tf.errors.ResourceExhaustedError):
    """What TensorFlow's checkpoint writer raises on a full disk."""
    return error_class(
        None,
        None,
        "{{function_node __wrapped__SaveV2}} /m/checkpoints/ckpt-4_temp/"
        f"part-00000-of-00001.data-00000-of-00001.tempstate61; {NO_SPACE} "
        "[Op:SaveV2]",
    )


@pytest.mark.parametrize(
    "error, path",
    [
        (OSError(errno.ENOSPC, NO_SPACE, "out/vocab.txt"), "out/vocab.txt"),
        (
            checkpoint_error(),
            "/m/checkpoints/ckpt-4_temp/part-00000-of-00001.data-00000-of-"
            "00001.tempstate61",
        ),
        (
            checkpoint_error(tf.errors.UnknownError),
            "/m/checkpoints/ckpt-4_temp/part-00000-of-00001.data-00000-of-"
            "00001.tempstate61",
        ),
        # h5py (a preset's weights) keeps errno 28 only in its message.
        (
            OSError(
                "Unable to synchronously write data (file write failed: "
                f"errno = 28, error message = '{NO_SPACE}')"
            ),
            None,
        ),
    ],
)
def test_full_disks_are_recognised_with_their_path(error, path):
    assert disk_full.is_disk_full(error)
    assert disk_full.full_path(error) == path
    try:
        try:
            raise error
        except Exception as cause:
            raise RuntimeError("a framework's wrapper") from cause
    except RuntimeError as wrapped:
        assert disk_full.is_disk_full(wrapped)
    message = disk_full.disk_full_message(error, "the model directory")
    assert message == (
        f"{NO_SPACE} while writing {path or 'the model directory'}: "
        "the disk is full."
    )


@pytest.mark.parametrize(
    "error",
    [
        PermissionError(errno.EACCES, "Permission denied", "x"),
        OSError("disk"),
        ValueError("bug"),
        tf.errors.ResourceExhaustedError(None, None, "OOM when allocating"),
    ],
)
def test_other_errors_are_not_a_full_disk(error):
    assert not disk_full.is_disk_full(error)


@pytest.mark.parametrize(
    "error, named",
    [
        (OSError(errno.ENOSPC, NO_SPACE, "out/vocab.txt"), "out/vocab.txt"),
        (checkpoint_error(), "/m/checkpoints/ckpt-4_temp/part-00000"),
    ],
)
def test_the_scripts_print_a_full_disk_as_one_line(
    error, named, monkeypatch, capsys
):
    def main(argv):
        raise error

    assert run_script(main, monkeypatch) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("ERROR: "), err
    assert f"{NO_SPACE} while writing {named}" in err
    assert "the disk is full. Nothing half-written was published" in err
    assert "Traceback" not in err


def test_a_full_disk_in_a_file_writer_names_the_file(tmp_path, monkeypatch):
    """`write_text_atomically` and `write_json_atomically` (vocabulary,
    manifest, config.json, run.json, results.json)."""
    path = tmp_path / "results.json"
    path.write_text("old\n")
    monkeypatch.setattr(fileio.os, "fsync", enospc)
    for write in (
        lambda: fileio.write_text_atomically(path, "new\n"),
        lambda: fileio.write_json_atomically(path, {"new": 1}),
    ):
        with pytest.raises(OSError) as raised:
            write()
        assert raised.value.errno == errno.ENOSPC
        assert disk_full.full_path(raised.value) == str(path)
        assert path.read_text() == "old\n"
        assert os.listdir(tmp_path) == ["results.json"]


def test_a_full_disk_in_a_directory_writer_leaves_nothing(tmp_path):
    """`atomic_directory`: the preset and every export format."""
    path = tmp_path / "export"
    with pytest.raises(OSError) as raised:
        with fileio.atomic_directory(path) as tmp_dir:
            with open(os.path.join(tmp_dir, "saved_model.pb"), "wb") as f:
                f.write(b"half")
                enospc()
    assert disk_full.full_path(raised.value) == str(path)
    assert os.listdir(tmp_path) == []


def test_a_full_disk_while_saving_a_preset_keeps_the_old_one(tmp_path):
    from tupe_tf.training import pretrain_model

    preset = tmp_path / "preset"
    preset.mkdir()
    (preset / "config.json").write_text("{}")

    class Model:
        preprocessor = None

        def save_to_preset(self, directory):
            with open(os.path.join(directory, "config.json"), "w") as f:
                f.write("{")
            enospc()

    with pytest.raises(OSError) as raised:
        pretrain_model.save_preset_atomically(
            Model(), str(preset), lambda: None, 32
        )
    assert disk_full.is_disk_full(raised.value)
    assert os.listdir(tmp_path) == ["preset"]
    assert (preset / "config.json").read_text() == "{}"


@pytest.fixture
def small_corpus(tmp_path):
    import data_pipeline

    path = tmp_path / "corpus.txt"
    with open(data_pipeline.embedded_corpus_path()) as f:
        path.write_text(f.read(20_000))
    return str(path)


def test_a_full_disk_while_writing_a_vocabulary(
    tmp_path, small_corpus, monkeypatch
):
    import data_pipeline

    output = tmp_path / "vocab" / "vocab.txt"
    monkeypatch.setattr(fileio.os, "fsync", enospc)
    with pytest.raises(OSError) as raised:
        data_pipeline.build_vocabulary(small_corpus, 200, str(output))
    assert disk_full.full_path(raised.value) == str(output)
    assert not output.exists()
    assert not output.parent.exists() or os.listdir(output.parent) == []


def test_a_full_disk_while_writing_shards(tmp_path, small_corpus, monkeypatch):
    import data_pipeline

    vocab = str(tmp_path / "vocab.txt")
    data_pipeline.build_vocabulary(small_corpus, 200, vocab)
    output_dir = tmp_path / "shards"

    class FullDiskWriter:
        def __init__(self, path, options=None):
            self.path = path

        def write(self, record):
            enospc()

        def close(self):
            pass

    monkeypatch.setattr(tf.io, "TFRecordWriter", FullDiskWriter)
    with pytest.raises(OSError) as raised:
        data_pipeline.build_shards(
            data_pipeline.ShardConfig(
                input_patterns=small_corpus,
                vocab_file=vocab,
                output_dir=str(output_dir),
                max_seq_length=32,
                num_shards=2,
            )
        )
    assert disk_full.is_disk_full(raised.value)
    assert str(output_dir) in disk_full.full_path(raised.value)
    assert not output_dir.exists()
