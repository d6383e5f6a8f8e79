"""MultiWorkerMirroredStrategy: two real worker processes on 127.0.0.1.

Keras 3.15 `fit` fails under this strategy (keras-team/keras#20585), so
`run_pretraining` trains with `DistributedTrainingLoop`; this proves it
trains (loss falls) and keeps the workers in sync (identical weights).
"""

import dataclasses
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.training.conftest import REPO
from tests.training.conftest import pretrain_config
from tests.training.conftest import subprocess_env
from tests.training.conftest import worker_tf_configs

pytestmark = pytest.mark.large

DRIVER = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "multi_worker_driver.py"
)


def test_two_workers_train_in_sync(tmp_path, shards, vocab_file):
    config = pretrain_config(
        tmp_path / "model",
        shards,
        vocab_file,
        num_train_steps=24,
        save_every=8,
        eval_every=8,
        global_batch_size=8,
        learning_rate=2e-3,
        warmup_steps=2,
        dropout=0.0,
        strategy="multi_worker_mirrored",
    )
    config_path = tmp_path / "config.json"
    config_path.write_text(json.dumps(dataclasses.asdict(config)))
    processes = [
        subprocess.Popen(
            [
                sys.executable,
                DRIVER,
                str(config_path),
                str(tmp_path / f"worker{index}.npz"),
            ],
            env=subprocess_env(TF_CONFIG=tf_config),
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for index, tf_config in enumerate(worker_tf_configs(2))
    ]
    outputs = []
    try:
        for process in processes:
            outputs.append(process.communicate(timeout=240)[0])
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
    for process, output in zip(processes, outputs):
        assert process.returncode == 0, output[-4000:]

    chief = json.loads((tmp_path / "worker0.npz.json").read_text())
    other = json.loads((tmp_path / "worker1.npz.json").read_text())
    assert chief["num_replicas"] == 2 and chief["global_step"] == 24
    losses = chief["history_this_run"]["loss"]
    assert losses[-1] < losses[0] - 0.1, losses
    assert (
        other["history_this_run"]["loss"] == losses
    )  # reduced over both workers

    w0 = np.load(tmp_path / "worker0.npz")
    w1 = np.load(tmp_path / "worker1.npz")
    assert sorted(w0.files) == sorted(w1.files)
    for name in w0.files:
        np.testing.assert_array_equal(w0[name], w1[name], err_msg=name)

    # Only the chief's outputs remain.
    model_dir = tmp_path / "model"
    assert (model_dir / "preset" / "model.weights.h5").exists()
    assert (
        sorted(
            p.name for p in model_dir.iterdir() if p.name.startswith(".worker")
        )
        == []
    )
    assert (model_dir / "checkpoints" / "ckpt-24.index").exists()
