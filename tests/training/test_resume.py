"""Crash and resume: `kill -9` mid-run, rerun the same command, compare.

The resumed run must end where an uninterrupted run ends: same weights
(optimizer state, step and learning-rate schedule restored; the data stream
continues after the batches already trained on).
"""

import json
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from tests import subprocesses
from tests.training.conftest import PRETRAIN_SCRIPT
from tests.training.conftest import REPO
from tests.training.conftest import TINY_MODEL_FLAGS
from tests.training.conftest import run_script
from tests.training.conftest import subprocess_env

pytestmark = pytest.mark.large

NUM_STEPS = 24


def training_flags(
    data_flags, model_dir, *extra, num_steps=NUM_STEPS, save_every=4
):
    """The flags of a tiny run that saves and logs every `save_every`
    steps, without dropout (no RNG in training: runs must agree exactly)."""
    return (
        TINY_MODEL_FLAGS
        + data_flags
        + [
            f"--model_dir={model_dir}",
            f"--num_train_steps={num_steps}",
            f"--save_every={save_every}",
            "--eval_steps=2",
            "--global_batch_size=8",
            "--learning_rate=2e-3",
            "--warmup_steps=4",
            "--dropout=0",
            f"--log_every={save_every}",
            *extra,
        ]
    )


def _checkpoint_steps(checkpoint_dir):
    """Steps of the complete checkpoints: those the `checkpoint` index file
    lists (a `ckpt-N.index` file is written before the index names it, so
    a kill in between leaves ckpt-N incomplete)."""
    index = os.path.join(checkpoint_dir, "checkpoint")
    try:
        with open(index) as f:
            text = f.read()
    except OSError:
        return []
    return sorted({int(step) for step in re.findall(r'"ckpt-(\d+)"', text)})


def assert_same_training(results, reference_results):
    """Two runs' `results.json`: the same evaluation loss and backbone
    weights, to round-off."""
    assert results["eval"]["loss"] == pytest.approx(
        reference_results["eval"]["loss"], abs=1e-4
    )
    for got, want in zip(
        _backbone_weights(results["preset_dir"]),
        _backbone_weights(reference_results["preset_dir"]),
    ):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def _backbone_weights(preset):
    import tupe_tf

    return [w.numpy() for w in tupe_tf.TupeBackbone.from_preset(preset).weights]


# With gradient accumulation too: checkpoints and the data skip count
# updates, each of which consumed its micro-batches.
@pytest.mark.parametrize(
    "extra", [(), ("--gradient_accumulation_steps=2",)], ids=["k1", "k2"]
)
def test_kill_9_then_rerun_resumes_and_matches_an_uninterrupted_run(
    tmp_path, data_flags, extra
):
    reference_dir = tmp_path / "reference"
    reference = run_script(
        PRETRAIN_SCRIPT, training_flags(data_flags, reference_dir, *extra)
    )
    assert reference.returncode == 0, reference.stderr[-4000:]

    crashed_dir = tmp_path / "crashed"
    command = [sys.executable, PRETRAIN_SCRIPT] + training_flags(
        data_flags, crashed_dir, *extra
    )
    process = subprocess.Popen(
        command,
        env=subprocess_env(),
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 180
    try:
        while time.time() < deadline and process.poll() is None:
            steps = _checkpoint_steps(crashed_dir / "checkpoints")
            if steps and steps[-1] >= 8:
                break
            time.sleep(0.05)
        subprocesses.interrupt(process, signal.SIGKILL)
    finally:
        process.wait()
    assert process.returncode == -signal.SIGKILL
    assert not (crashed_dir / "results.json").exists()
    killed_at = _checkpoint_steps(crashed_dir / "checkpoints")[-1]
    assert 8 <= killed_at < NUM_STEPS

    resumed = run_script(
        PRETRAIN_SCRIPT, training_flags(data_flags, crashed_dir, *extra)
    )
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    results = json.loads((crashed_dir / "results.json").read_text())
    assert results["global_step"] == NUM_STEPS
    # Resumed from a complete checkpoint at or after the one seen before the kill.
    assert results["resumed_from_step"] >= killed_at
    assert results["resumed_from_step"] % 4 == 0
    assert f"Resumed from {crashed_dir / 'checkpoints'}" in resumed.stdout

    reference_results = json.loads((reference_dir / "results.json").read_text())
    assert_same_training(results, reference_results)
