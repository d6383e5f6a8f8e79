"""A `--model_dir` URL: every file of the run under it, or a refusal.

`ram://`, TensorFlow's in-process file system, stands in for `gs://`: the
run record, the lock, the checkpoints, the logs, the preset and
`results.json` go through the same `tf.io.gfile` calls.
"""

import os
import secrets
import shutil
import types

import numpy as np
import pytest
import tensorflow as tf

from tests.training.conftest import PRETRAIN_SCRIPT
from tests.training.conftest import REPO
from tests.training.conftest import assert_refused
from tests.training.conftest import pretrain_config
from tests.training.conftest import pretrain_flags
from tests.training.conftest import run_script
from tupe_tf.training import distribution
from tupe_tf.training.pretrain import run_pretraining
from tupe_tf.utils import fileio

gfile = tf.io.gfile


def files_under(url):
    """The relative paths of every file under `url`."""
    return {
        os.path.join(directory[len(url) :].strip("/"), name)
        for directory, _, names in gfile.walk(url)
        for name in names
    }


@pytest.mark.large
def test_a_ram_model_dir_holds_every_file_of_the_run_and_resumes(
    tmp_path, shards, vocab_file, monkeypatch
):
    import tupe_tf

    monkeypatch.chdir(tmp_path)  # where `abspath` wrote `ram:/...` before
    model_dir = f"ram://run-{secrets.token_hex(8)}/model"
    config = pretrain_config(
        model_dir, shards, vocab_file, num_train_steps=2, save_every=2
    )
    run_pretraining(config)
    files = files_under(model_dir)
    for name in (
        "results.json",
        "checkpoints/run.json",
        "checkpoints/checkpoint",
        "checkpoints/ckpt-2.index",
        "preset/config.json",
        "preset/model.weights.h5",
        "preset/assets/tokenizer/vocabulary.txt",
    ):
        assert name in files, sorted(files)
    assert any(name.startswith("logs/train/events.") for name in files)
    assert not [name for name in files if "/." in "/" + name]  # no leftovers
    assert os.listdir(tmp_path) == []

    # A resume reads the record and the checkpoint there and replaces the
    # preset.
    longer = pretrain_config(
        model_dir, shards, vocab_file, num_train_steps=4, save_every=2
    )
    result = run_pretraining(longer)
    results = fileio.read_json(f"{model_dir}/results.json", "")
    assert results["resumed_from_step"] == 2 and results["global_step"] == 4
    assert results["model_dir"] == model_dir
    assert results["preset_dir"] == f"{model_dir}/preset"
    assert results["checkpoint"] == f"{model_dir}/checkpoints/ckpt-4"
    local_preset = tmp_path / "preset"
    for name in files_under(f"{model_dir}/preset"):
        os.makedirs((local_preset / name).parent, exist_ok=True)
        gfile.copy(f"{model_dir}/preset/{name}", str(local_preset / name))
    backbone = tupe_tf.TupeBackbone.from_preset(str(local_preset))
    for restored, trained in zip(
        backbone.weights, result.model.backbone.weights
    ):
        np.testing.assert_array_equal(restored.numpy(), trained.numpy())
    shutil.rmtree(local_preset)
    assert os.listdir(tmp_path) == []
    gfile.rmtree(model_dir.rsplit("/", 1)[0])


def test_a_model_dir_of_an_unknown_scheme_is_refused_before_the_work_dir(
    tmp_path, monkeypatch
):
    from tupe_tf.training import PretrainConfig

    monkeypatch.chdir(tmp_path)
    config = PretrainConfig(
        work_dir=str(tmp_path / "work"), model_dir="foo://bucket/run"
    )
    with pytest.raises(
        fileio.OutputError,
        match=r"--model_dir='foo://bucket/run': TensorFlow has no file system",
    ):
        run_pretraining(config)
    assert os.listdir(tmp_path) == []


@pytest.mark.large
def test_the_script_refuses_an_unknown_scheme_in_one_line(tmp_path):
    flags = pretrain_flags(
        [f"--work_dir={tmp_path / 'work'}"], "foo://bucket/run"
    )
    assert_refused(
        run_script(PRETRAIN_SCRIPT, flags),
        "--model_dir='foo://bucket/run': TensorFlow has no file system for "
        "foo://",
    )
    assert os.listdir(tmp_path) == []
    assert not os.path.exists(os.path.join(REPO, "foo:"))


def test_a_workers_scratch_directory_beside_a_url_stays_a_url():
    worker = types.SimpleNamespace(
        extended=types.SimpleNamespace(should_checkpoint=False),
        cluster_resolver=types.SimpleNamespace(task_id=1),
    )
    assert (
        distribution.worker_dir("gs://b/run/checkpoints", worker)
        == "gs://b/run/.worker1_checkpoints"
    )
