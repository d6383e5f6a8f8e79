"""One run per --model_dir (`tupe_tf.training.run_lock`).

A live run's lock refuses a second run, naming the holder; a stale lock
(process gone, pid reused, another host's lock not refreshed) is taken
over with a warning; the lock goes when the run ends, however it ends.
"""

import json
import logging
import os
import socket
import subprocess
import sys
import time
import types

import pytest

from tests.training.conftest import PRETRAIN_SCRIPT
from tests.training.conftest import assert_refused
from tests.training.conftest import pretrain_config
from tests.training.conftest import pretrain_flags
from tests.training.conftest import run_script
from tupe_tf.training import pretrain
from tupe_tf.training import run_lock
from tupe_tf.training.pretrain import run_pretraining


def write_lock(directory, **document):
    path = os.path.join(directory, run_lock.LOCK_NAME)
    with open(path, "w") as f:
        json.dump(document, f)
    return path


@pytest.fixture
def sleeper():
    """A live process of this host that is not this one."""
    process = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)"]
    )
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
    start = run_lock.process_start_time(sleeper.pid)
    assert start is not None
    write_lock(
        tmp_path, host=socket.gethostname(), pid=sleeper.pid, start_time=start
    )
    with pytest.raises(
        run_lock.DirectoryInUseError, match=f"pid {sleeper.pid}"
    ):
        run_lock.acquire(str(tmp_path))


def test_a_gone_or_reused_pid_is_taken_over(tmp_path, sleeper, caplog):
    sleeper.kill()
    sleeper.wait()
    host = socket.gethostname()
    stale_holders = [
        dict(host=host, pid=sleeper.pid, start_time=1.0),
        # This process's pid with another start time: the pid was reused.
        dict(host=host, pid=os.getpid(), start_time=1.0),
    ]
    for holder in stale_holders:
        write_lock(tmp_path, **holder)
        with run_lock.hold(tmp_path) as path:
            assert json.loads(open(path).read()) == run_lock.this_process()
        assert os.listdir(tmp_path) == []
    assert "its process is gone" in caplog.text
    assert "its pid now belongs to another process" in caplog.text


def test_another_hosts_lock_is_stale_only_once_it_stops_being_refreshed(
    tmp_path,
):
    path = write_lock(tmp_path, host="elsewhere", pid=1, start_time=1.0)
    with pytest.raises(run_lock.DirectoryInUseError, match="host elsewhere"):
        run_lock.acquire(str(tmp_path))
    old = time.time() - run_lock.STALE_AFTER_SECONDS - 60
    os.utime(path, (old, old))
    assert run_lock.acquire(str(tmp_path)) == path
    assert json.loads(open(path).read())["host"] == socket.gethostname()
    run_lock.release(path)


def test_the_holder_refreshes_its_lock(tmp_path, monkeypatch):
    monkeypatch.setattr(run_lock, "REFRESH_SECONDS", 0.05)
    with run_lock.hold(tmp_path) as path:
        old = time.time() - 3600
        os.utime(path, (old, old))
        time.sleep(0.5)
        assert time.time() - os.stat(path).st_mtime < 60


def test_release_leaves_another_runs_lock(tmp_path):
    path = write_lock(tmp_path, host="elsewhere", pid=1, start_time=1.0)
    run_lock.release(path)
    assert os.path.exists(path)


def test_an_unreadable_lock_is_named(tmp_path):
    path = os.path.join(tmp_path, run_lock.LOCK_NAME)
    with open(path, "w") as f:
        f.write("{not json")
    with pytest.raises(
        run_lock.DirectoryInUseError, match="not readable JSON.*delete it"
    ):
        run_lock.acquire(str(tmp_path))


def test_object_stores_are_not_locked(caplog):
    with run_lock.hold("gs://bucket/run") as path:
        assert path is None
    assert "no lock is taken" in caplog.text


def test_each_worker_holds_a_lock_of_its_own_name(tmp_path):
    config = types.SimpleNamespace(model_dir=str(tmp_path))

    def strategy(task_id):
        extended = types.SimpleNamespace(
            _in_multi_worker_mode=lambda: True,
            _task_type="worker",
            _task_id=task_id,
        )
        return types.SimpleNamespace(extended=extended)

    with pretrain.hold_model_dir(config, strategy(0)) as chief:
        with pretrain.hold_model_dir(config, strategy(1)) as worker:
            assert os.path.basename(chief) == "run.lock"
            assert os.path.basename(worker) == ".worker1_run.lock"
    assert os.listdir(tmp_path) == []


def test_without_proc_the_holder_still_releases_its_lock(tmp_path, monkeypatch):
    monkeypatch.setattr(run_lock, "process_start_time", lambda pid: None)
    run_lock._start_time.cache_clear()
    try:
        with run_lock.hold(tmp_path):
            time.sleep(0.05)
        assert os.listdir(tmp_path) == []
    finally:
        run_lock._start_time.cache_clear()


@pytest.mark.large
def test_a_second_run_is_refused_then_a_stale_lock_taken_over(
    tmp_path, shards, vocab_file, data_flags, sleeper, caplog
):
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    start = run_lock.process_start_time(sleeper.pid)
    lock = write_lock(
        model_dir, host=socket.gethostname(), pid=sleeper.pid, start_time=start
    )
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
