"""`fileio.make_writable_directory` and `fileio.write_json_atomically`: the one
output-directory check and the one JSON writer of the training, export and
analysis code."""

import json
import os

import pytest

from tupe_tf.utils import fileio
from tupe_tf.utils.errors import UserError


def test_check_writable_dir_creates_the_directory_and_leaves_no_probe(
    tmp_path,
):
    directory = tmp_path / "runs" / "model"
    fileio.make_writable_directory(str(directory), "--model_dir")
    assert directory.is_dir()
    assert os.listdir(directory) == []


def test_check_writable_dir_names_the_flag_and_the_os_error(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    target = str(blocker / "model")
    with pytest.raises(fileio.OutputError) as caught:
        fileio.make_writable_directory(target, "--model_dir")
    assert isinstance(caught.value, UserError)
    assert str(caught.value).startswith(
        f"--model_dir={target!r} is not writable: "
    )
    assert "Not a directory" in str(caught.value)
    assert os.listdir(tmp_path) == ["a_file"]


def test_write_json_atomically_writes_one_json_document(tmp_path):
    path = tmp_path / "out" / "results.json"
    fileio.write_json_atomically(
        str(path), {"b": 1, "a": object}, sort_keys=True, default=str
    )
    text = path.read_text()
    assert text.endswith("}\n")
    assert json.loads(text) == {"a": str(object), "b": 1}
    assert text.index('"a"') < text.index('"b"')
    assert os.listdir(path.parent) == ["results.json"]
    with pytest.raises(TypeError):
        fileio.write_json_atomically(str(path), {"a": object})
    assert json.loads(path.read_text())["b"] == 1  # the old file is kept
