"""`fileio` on URLs: `tf.io.gfile`'s in-process `ram://` file system stands
in for `gs://` (the same calls; no network)."""

import os
import secrets

import pytest
import tensorflow as tf

from tupe_tf.utils import fileio
from tupe_tf.utils.errors import UserError

gfile = tf.io.gfile


@pytest.fixture
def root():
    """A fresh `ram://` directory, removed after the test."""
    url = f"ram://fileio-{secrets.token_hex(8)}"
    gfile.makedirs(url)
    yield url
    gfile.rmtree(url)


@pytest.fixture(autouse=True)
def local_temp(tmp_path, monkeypatch):
    """The system's temporary directory, where URLs' local temporaries go:
    checked empty after each test."""
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(temp))
    yield temp
    assert os.listdir(temp) == []


def tree(url):
    """{relative path: text} of every file under `url`."""
    files = {}
    for directory, _, names in gfile.walk(url):
        relative = directory[len(url) :].strip("/")
        for name in names:
            with gfile.GFile(f"{directory.rstrip('/')}/{name}") as f:
                files[os.path.join(relative, name)] = f.read()
    return files


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def test_json_is_written_and_read_under_the_url(root, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    url = f"{root}/run/checkpoints/run.json"
    fileio.write_json_atomically(url, {"step": 1})
    fileio.write_json_atomically(url, {"step": 2})
    assert fileio.read_json(url, "advice") == {"step": 2}
    assert gfile.listdir(f"{root}/run/checkpoints") == ["run.json"]
    assert fileio.exists(url) and not fileio.exists(f"{root}/none")
    # Nothing local: `abspath` made `ram://x` the local `<cwd>/ram:/x`.
    assert os.listdir(tmp_path) == ["temp"]
    with gfile.GFile(url, "w") as f:
        f.write("{not json")
    with pytest.raises(UserError, match=r"run\.json cannot be read .*advice"):
        fileio.read_json(url, "advice")
    with pytest.raises(UserError, match=r"none\.json cannot be read"):
        fileio.read_json(f"{root}/none.json", "advice")


def test_atomic_files_publish_urls_only_on_success(root):
    a, b = f"{root}/a", f"{root}/b"
    fileio.write_text_atomically(a, "old a")
    with pytest.raises(RuntimeError):
        with fileio.atomic_files([a, b]) as (tmp_a, _):
            write(tmp_a, "new a")
            raise RuntimeError("failed")
    assert tree(root) == {"a": "old a"}
    with fileio.atomic_files([a, b]) as (tmp_a, tmp_b):
        assert not fileio.is_url(tmp_a)  # local files for any writer
        write(tmp_a, "new a")
        write(tmp_b, "new b")
        assert tree(root) == {"a": "old a"}  # nothing published yet
    assert tree(root) == {"a": "new a", "b": "new b"}
    with pytest.raises(ValueError, match="mixed"):
        with fileio.atomic_files([a, "local.txt"]):
            pass


def test_atomic_directory_replaces_a_url_only_when_complete(root):
    preset = f"{root}/run/preset"
    with fileio.atomic_directory(preset) as tmp:
        write(os.path.join(tmp, "config.json"), "1")
        write(os.path.join(tmp, "assets", "tokenizer", "vocab.txt"), "v1")
    assert tree(preset) == {
        "config.json": "1",
        os.path.join("assets", "tokenizer", "vocab.txt"): "v1",
    }
    with pytest.raises(FileExistsError, match="Preset .*--overwrite"):
        with fileio.atomic_directory(preset, what="Preset"):
            pass
    with pytest.raises(ValueError):
        with fileio.atomic_directory(preset, overwrite=True) as tmp:
            write(os.path.join(tmp, "config.json"), "half")
            raise ValueError("failed")
    assert tree(preset)["config.json"] == "1"
    with fileio.atomic_directory(preset, overwrite=True) as tmp:
        write(os.path.join(tmp, "config.json"), "2")
    # The old directory's files are gone, no staging copy is left.
    assert tree(preset) == {"config.json": "2"}
    assert gfile.listdir(f"{root}/run") == ["preset"]


def test_a_failed_move_into_place_restores_the_old_directory(root, monkeypatch):
    preset = f"{root}/preset"
    with fileio.atomic_directory(preset) as tmp:
        write(os.path.join(tmp, "config.json"), "old")
        write(os.path.join(tmp, "weights"), "old")
    rename = gfile.rename

    def failing_rename(source, target, overwrite=False):
        if ".tmp-" in source and target.endswith("weights"):
            raise tf.errors.UnavailableError(None, None, "connection lost")
        rename(source, target, overwrite)

    monkeypatch.setattr(gfile, "rename", failing_rename)
    with pytest.raises(tf.errors.UnavailableError):
        with fileio.atomic_directory(preset, overwrite=True) as tmp:
            write(os.path.join(tmp, "config.json"), "new")
            write(os.path.join(tmp, "weights"), "new")
    assert tree(preset) == {"config.json": "old", "weights": "old"}
    assert gfile.listdir(root) == ["preset"]


def test_remove_tree_and_absolute_path_keep_urls(root):
    fileio.write_text_atomically(f"{root}/scratch/ckpt", "x")
    fileio.remove_tree(f"{root}/scratch")
    fileio.remove_tree(f"{root}/never-there")  # ignored, as locally
    assert gfile.listdir(root) == []
    assert fileio.absolute_path(f"{root}/x") == f"{root}/x"
    assert fileio.absolute_path("x") == os.path.abspath("x")


def test_a_scheme_tensorflow_has_no_file_system_for_is_refused(tmp_path):
    message = (
        r"^--model_dir='foo://bucket/run': TensorFlow has no file system "
        r"for foo:// here \(it has local paths and .*ram://.*\)"
    )
    with pytest.raises(fileio.OutputError, match=message):
        fileio.check_scheme("foo://bucket/run", "--model_dir")
    with pytest.raises(fileio.OutputError, match="--output_dir='foo://x'"):
        fileio.make_writable_directory("foo://x", "--output_dir")
    fileio.check_scheme("ram://x", "--model_dir")
    fileio.check_scheme(str(tmp_path / "local"), "--model_dir")
    assert os.listdir(tmp_path) == ["temp"]


def test_made_directory_writes_a_url_directory(root):
    with fileio.made_directory(f"{root}/out", "--model_dir") as path:
        assert path == f"{root}/out"
    assert gfile.isdir(f"{root}/out") and gfile.listdir(f"{root}/out") == []
