"""One run per --model_dir (`tupe_tf.training.run_lock`).

A live run's lock refuses a second run, naming the holder; a lock file
whose process is gone (the kernel released its flock) is taken over with a
warning; the lock goes when the run ends, however it ends.
"""

import json
import logging
import os
import socket
import subprocess
import sys
import types

import pytest

from tests.training.conftest import PRETRAIN_SCRIPT
from tests.training.conftest import assert_refused
from tests.training.conftest import pretrain_config
from tests.training.conftest import pretrain_flags
from tests.training.conftest import run_script
from tupe_tf.training import PretrainConfig
from tupe_tf.training import distribution
from tupe_tf.training import pretrain
from tupe_tf.training import run_lock
from tupe_tf.training.pretrain import run_pretraining


def write_lock(directory, **document):
    path = os.path.join(directory, run_lock.LOCK_NAME)
    with open(path, "w") as f:
        json.dump(document, f)
    return path


# Another process's run: flocks the lock file named by argv[1], names
# itself in it as `run_lock` does, and sleeps.
HOLD = """
import fcntl, json, os, socket, sys, time
lock = open(sys.argv[1], "a+")
fcntl.flock(lock, fcntl.LOCK_EX)
lock.truncate(0)
json.dump(dict(host=socket.gethostname(), pid=os.getpid(), start_time=1.0), lock)
lock.flush()
print("held", flush=True)
time.sleep(120)
"""


@pytest.fixture
def sleeper(tmp_path):
    """A live process of this host that holds `<tmp_path>/model/run.lock`."""
    (tmp_path / "model").mkdir()
    process = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path / "model" / "run.lock")],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout.readline() == "held\n"
    yield process
    process.kill()
    process.wait()


def test_a_held_directory_is_refused_naming_the_holder(tmp_path):
    with run_lock.hold(tmp_path) as path:
        holder = json.loads(open(path).read())
        assert holder["host"] == socket.gethostname()
        assert holder["pid"] == os.getpid()
        with pytest.raises(run_lock.DirectoryInUseError) as refusal:
            run_lock.acquire(str(tmp_path))
        message = str(refusal.value)
        assert f"--model_dir='{tmp_path}' is in use by another run" in message
        assert f"host {socket.gethostname()}, pid {os.getpid()}, started" in (
            message
        )
        assert path in message
    assert not os.path.exists(path)
    assert os.listdir(tmp_path) == []


def test_the_lock_is_released_when_the_run_fails(tmp_path):
    with pytest.raises(RuntimeError):
        with run_lock.hold(tmp_path):
            raise RuntimeError("a failed run")
    assert os.listdir(tmp_path) == []


def test_a_live_process_of_this_host_keeps_its_lock(tmp_path, sleeper):
    with pytest.raises(
        run_lock.DirectoryInUseError, match=f"pid {sleeper.pid}"
    ):
        run_lock.acquire(str(tmp_path / "model"))


def test_a_gone_or_reused_pid_is_taken_over(tmp_path, sleeper, caplog):
    sleeper.kill()
    sleeper.wait()
    directory = tmp_path / "model"
    stale_holders = [
        None,  # The lock file the killed process left.
        # This process's pid with another start time: the pid was reused.
        dict(host=socket.gethostname(), pid=os.getpid(), start_time=1.0),
    ]
    for holder in stale_holders:
        if holder:
            write_lock(directory, **holder)
        with run_lock.hold(directory) as path:
            assert json.loads(open(path).read()) == run_lock.this_process()
        assert os.listdir(directory) == []
    assert caplog.text.count("its process is gone") == 2


def test_release_leaves_another_runs_lock(tmp_path):
    path = write_lock(tmp_path, host="elsewhere", pid=1, start_time=1.0)
    run_lock.release(path)
    assert os.path.exists(path)


def test_an_unreadable_lock_is_named(tmp_path, sleeper):
    (tmp_path / "model" / run_lock.LOCK_NAME).write_text("{not json")
    with pytest.raises(
        run_lock.DirectoryInUseError, match="not named itself yet; lock file"
    ):
        run_lock.acquire(str(tmp_path / "model"))


def test_object_stores_are_not_locked(caplog):
    with run_lock.hold("gs://bucket/run") as path:
        assert path is None
    assert "no lock is taken" in caplog.text


def test_each_worker_holds_a_lock_of_its_own_name(tmp_path):
    config = PretrainConfig(model_dir=str(tmp_path))

    def run(task_id):
        strategy = types.SimpleNamespace(
            extended=types.SimpleNamespace(should_checkpoint=task_id == 0),
            cluster_resolver=types.SimpleNamespace(
                task_type="worker", task_id=task_id
            ),
        )
        paths = distribution.worker_paths(config, strategy)
        return types.SimpleNamespace(config=config, paths=paths)

    with pretrain.hold_model_dir(run(0)) as chief:
        with pretrain.hold_model_dir(run(1)) as worker:
            assert os.path.basename(chief) == "run.lock"
            assert os.path.basename(worker) == ".worker1_run.lock"
    assert os.listdir(tmp_path) == []


@pytest.mark.large
def test_a_second_run_is_refused_then_a_stale_lock_taken_over(
    tmp_path, shards, vocab_file, data_flags, sleeper, caplog
):
    model_dir = tmp_path / "model"
    lock = model_dir / run_lock.LOCK_NAME
    flags = pretrain_flags(
        data_flags,
        model_dir,
        "--num_train_steps=2",
        "--save_every=2",
        "--global_batch_size=8",
        "--eval_steps=1",
    )
    assert_refused(
        run_script(PRETRAIN_SCRIPT, flags),
        f"pid {sleeper.pid}, started",
        f"host {socket.gethostname()}",
    )
    # Nothing written: the other run's lock is all the directory holds.
    assert os.listdir(model_dir) == ["run.lock"]

    sleeper.kill()
    sleeper.wait()
    caplog.set_level(logging.WARNING)
    run_pretraining(
        pretrain_config(
            model_dir, shards, vocab_file, num_train_steps=1, eval_files=[]
        )
    )
    assert "Taking over the stale lock" in caplog.text
    assert os.path.exists(model_dir / "checkpoints" / "checkpoint")
    assert not os.path.exists(lock)
