"""A full disk during pre-training is one line naming the checkpoint a
rerun resumes from; the rerun removes the failed save's `ckpt-N_temp`.

ENOSPC injected into the checkpoint writer (in process), and a real one on
a small tmpfs through scripts/pretrain.py where the test may mount one.
"""

import os
import subprocess

import pytest
import tensorflow as tf

from tests.training.conftest import PRETRAIN_SCRIPT
from tests.training.conftest import assert_refused
from tests.training.conftest import pretrain_config
from tests.training.conftest import pretrain_flags
from tests.training.conftest import run_script
from tupe_tf.training import pretrain_model
from tupe_tf.training.pretrain import run_pretraining
from tupe_tf.utils.disk_full import DiskFullError


def test_leftover_temporary_checkpoints_are_removed(tmp_path):
    (tmp_path / "ckpt-4_temp").mkdir()
    (tmp_path / "ckpt-4_temp" / "part-00000-of-00001.data").write_bytes(b"x")
    (tmp_path / "ckpt-2.index").write_bytes(b"kept")
    (tmp_path / "checkpoint").write_text("kept")
    pretrain_model.remove_temporary_checkpoints(str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == ["checkpoint", "ckpt-2.index"]


@pytest.mark.large
def test_a_full_disk_at_a_checkpoint_names_the_one_a_rerun_resumes_from(
    tmp_path, shards, vocab_file, monkeypatch
):
    model_dir = tmp_path / "model"
    checkpoints = model_dir / "checkpoints"
    save = tf.train.CheckpointManager.save

    def save_until_the_disk_is_full(manager, checkpoint_number=None, **kw):
        if checkpoint_number < 4:
            return save(manager, checkpoint_number=checkpoint_number, **kw)
        temp = checkpoints / f"ckpt-{checkpoint_number}_temp"
        temp.mkdir()
        part = temp / "part-00000-of-00001.data-00000-of-00001.tempstate1"
        part.write_bytes(b"half")
        raise tf.errors.ResourceExhaustedError(
            None, None, f"{part}; No space left on device [Op:SaveV2]"
        )

    monkeypatch.setattr(
        tf.train.CheckpointManager, "save", save_until_the_disk_is_full
    )
    config = pretrain_config(
        model_dir, shards, vocab_file, num_train_steps=4, save_every=2
    )
    with pytest.raises(DiskFullError) as raised:
        run_pretraining(config)
    message = str(raised.value)
    assert message.startswith(
        f"No space left on device while writing {checkpoints}/ckpt-4_temp/"
    ), message
    assert "the disk is full" in message
    assert (
        "A rerun resumes from the last complete checkpoint, "
        f"{checkpoints}/ckpt-2 (step 2)"
    ) in message
    assert not (model_dir / "run.lock").exists()

    monkeypatch.undo()
    result = run_pretraining(config)
    assert result.results["resumed_from_step"] == 2
    assert result.results["global_step"] == 4
    assert not [n for n in os.listdir(checkpoints) if "_temp" in n]


@pytest.fixture
def small_tmpfs(tmp_path):
    """A 800 KiB tmpfs: a tiny model's first checkpoint (about 480 KB) fits,
    the second does not; `remount(size)` grows it."""
    mount_point = tmp_path / "tmpfs"
    mount_point.mkdir()

    def mount(*options):
        return subprocess.run(
            [
                "mount",
                "-t",
                "tmpfs",
                "-o",
                ",".join(options),
                "tmpfs",
                str(mount_point),
            ],
            capture_output=True,
        )

    if mount("size=800k").returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield mount_point, lambda size: mount("remount", f"size={size}")
    finally:
        subprocess.run(["umount", str(mount_point)], capture_output=True)


@pytest.mark.large
def test_a_full_tmpfs_is_one_error_line_and_a_rerun_resumes(
    small_tmpfs, data_flags
):
    mount_point, remount = small_tmpfs
    model_dir = mount_point / "model"
    flags = pretrain_flags(
        data_flags,
        model_dir,
        "--num_train_steps=4",
        "--save_every=2",
        "--global_batch_size=8",
        "--eval_every=0",
        "--eval_steps=1",
    )
    assert_refused(
        run_script(PRETRAIN_SCRIPT, flags),
        "No space left on device while writing",
        "the disk is full",
        "ckpt-2 (step 2)",
    )

    assert remount("4m").returncode == 0
    run = run_script(PRETRAIN_SCRIPT, flags)
    assert run.returncode == 0, run.stderr[-3000:]
    assert f"Resumed from {model_dir / 'checkpoints' / 'ckpt-2'}" in run.stdout
    checkpoints = os.listdir(model_dir / "checkpoints")
    assert not [n for n in checkpoints if "_temp" in n], checkpoints
    assert tf.train.latest_checkpoint(str(model_dir / "checkpoints")).endswith(
        "ckpt-4"
    )
