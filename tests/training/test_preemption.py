"""Preemption, a crash and a lost worker: scripts/pretrain.py stopped at a
random step, rerun, compared with an uninterrupted run.

SIGTERM saves the checkpoint of the step the run is at and exits 75 (every
worker of a multi-worker run at the same step); a second SIGTERM during
that save ends the run at once, the previous checkpoint kept; `kill -9`
loses only the steps after the last complete checkpoint; a worker that
stops answering ends the other within the heartbeat bound, exit 69. Each
rerun resumes and ends with the uninterrupted run's weights (optimizer
state, step and learning-rate schedule restored; the data stream continues
after the batches already trained on). One uninterrupted one-device run is
the reference of the one-device cases, with gradient accumulation too (the
same global batches give the same updates, to round-off);
`MirroredStrategy` and the two workers have their own, their updates
differing from one device's beyond round-off.
"""

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
import types

import numpy as np
import pytest

from tests import subprocesses
from tests.subprocesses import _is_stopped
from tests.training.conftest import PRETRAIN_SCRIPT
from tests.training.conftest import REPO
from tests.training.conftest import TINY_MODEL_FLAGS
from tests.training.conftest import run_script
from tests.training.conftest import subprocess_env
from tests.training.conftest import worker_tf_configs
from tupe_tf.training.multi_worker import WORKER_LOST_EXIT_CODE
from tupe_tf.training.preemption import PREEMPTED_EXIT_CODE
from tupe_tf.training.preemption import StopRequests
from tupe_tf.training.preemption import watches_gce

NUM_STEPS = 40
SAVE_EVERY = 8
SLOW_SAVE_DRIVER = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "slow_save_driver.py"
)


def _flags(data_flags, model_dir, *extra):
    """The flags of a tiny run that saves and logs every `SAVE_EVERY`
    steps, without dropout (no RNG in training: runs must agree exactly)."""
    return (
        TINY_MODEL_FLAGS
        + data_flags
        + [
            f"--model_dir={model_dir}",
            f"--num_train_steps={NUM_STEPS}",
            f"--save_every={SAVE_EVERY}",
            "--eval_steps=2",
            "--global_batch_size=8",
            "--learning_rate=2e-3",
            "--warmup_steps=4",
            "--dropout=0",
            f"--log_every={SAVE_EVERY}",
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


@pytest.fixture(scope="module")
def reference_dir(tmp_path_factory, data_flags):
    """The model dir of one uninterrupted one-device run."""
    model_dir = tmp_path_factory.mktemp("reference")
    run = run_script(PRETRAIN_SCRIPT, _flags(data_flags, model_dir))
    assert run.returncode == 0, run.stderr[-4000:]
    return model_dir


class Run:
    """One process of scripts/pretrain.py (or a driver), stderr to a file."""

    def __init__(self, tmp_path, name, args, script=PRETRAIN_SCRIPT, **env):
        self.stderr_path = tmp_path / f"{name}.stderr"
        with open(self.stderr_path, "w") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, script] + list(args),
                env=subprocess_env(**env),
                cwd=REPO,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )

    def wait(self, timeout=300):
        try:
            return self.process.wait(timeout=timeout)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()

    @property
    def stderr(self):
        return self.stderr_path.read_text()

    def error_line(self):
        """The one `ERROR:` line of stderr."""
        errors = [
            line
            for line in self.stderr.splitlines()
            if line.startswith("ERROR:")
        ]
        assert len(errors) == 1, self.stderr[-4000:]
        assert "Traceback" not in self.stderr, self.stderr[-4000:]
        return errors[0]


def _wait_for_checkpoint_after(checkpoint_dir, step, runs, timeout=240):
    deadline = time.time() + timeout
    while time.time() < deadline:
        steps = _checkpoint_steps(checkpoint_dir)
        if steps and steps[-1] > step:
            return
        for run in runs:
            assert run.process.poll() is None, run.stderr[-4000:]
        time.sleep(0.02)
    raise AssertionError(f"no checkpoint after step {step} in {timeout} s")


def _signal_at_random_step(run, how, checkpoint_dir, max_delay=0.1):
    """Sends `how` at a random moment up to `max_delay` seconds (a few
    steps) after the latest checkpoint; returns the step of the latest
    complete checkpoint at that moment (read while the process is frozen)."""
    time.sleep(random.uniform(0.0, max_delay))
    run.process.send_signal(signal.SIGSTOP)
    try:
        while run.process.poll() is None and not _is_stopped(run.process.pid):
            time.sleep(0.001)
        assert run.process.poll() is None, run.stderr[-4000:]
        seen = _checkpoint_steps(checkpoint_dir)[-1]
        run.process.send_signal(how)
    finally:
        if how != signal.SIGSTOP:
            run.process.send_signal(signal.SIGCONT)
    return seen


def _preempted_step(error_line, checkpoint_dir):
    match = re.match(
        r"ERROR: Preempted \((.*?)\) at step (\d+): saved checkpoint (\S+) "
        r"and stopped\. Rerun the same command to resume",
        error_line,
    )
    assert match, error_line
    step = int(match.group(2))
    assert match.group(3) == os.path.join(checkpoint_dir, f"ckpt-{step}")
    return match.group(1), step


def _assert_resumed_to_the_reference(model_dir, reference_dir, resumed_from):
    results = json.loads((model_dir / "results.json").read_text())
    reference = json.loads((reference_dir / "results.json").read_text())
    assert results["global_step"] == NUM_STEPS
    assert results["resumed_from_step"] == resumed_from
    assert not [
        n for n in os.listdir(model_dir / "checkpoints") if "_temp" in n
    ]
    assert_same_training(results, reference)


def test_sigterm_requests_a_stop_and_gives_sigterm_its_default_action():
    def earlier_handler(signal_number, frame):
        raise AssertionError("SIGTERM reached the earlier handler")

    previous = signal.signal(signal.SIGTERM, earlier_handler)
    try:
        with StopRequests(watch_gce=False) as requests:
            assert not requests.should_stop
        # Nothing came: the earlier handler is back.
        assert signal.getsignal(signal.SIGTERM) is earlier_handler
        with StopRequests(watch_gce=False) as requests:
            signal.raise_signal(signal.SIGTERM)
            assert requests.reason == "SIGTERM" and requests.should_stop
            # A second SIGTERM would end the process at once.
            assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
            # Under multi-worker the all-reduced answer decides.
            requests.agree(False)
            assert not requests.should_stop
            requests.agree(True)
            assert requests.should_stop
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_the_metadata_server_is_polled_only_where_a_notice_can_come():
    import tensorflow as tf

    from tupe_tf.training.config import PretrainConfig

    one_device = tf.distribute.get_strategy()
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver
    cloud_tpu = types.SimpleNamespace(cluster_resolver=object.__new__(resolver))
    assert not watches_gce(PretrainConfig(), one_device)
    assert watches_gce(PretrainConfig(), cloud_tpu)
    flag = PretrainConfig(watch_gce_maintenance=True)
    assert watches_gce(flag, one_device)
    flag = PretrainConfig(watch_gce_maintenance=False)
    assert not watches_gce(flag, cloud_tpu)


# One device: SIGTERM, then a second SIGTERM into the save, then a rerun;
# MirroredStrategy: SIGTERM, then a rerun.
@pytest.mark.parametrize(
    "extra",
    [(), ("--strategy=mirrored", "--num_cpu_devices=2")],
    ids=["one_device", "mirrored"],
)
@pytest.mark.large
def test_sigterm_saves_the_step_it_is_at_and_a_rerun_loses_nothing(
    tmp_path, data_flags, reference_dir, extra
):
    model_dir = tmp_path / "model"
    checkpoints = model_dir / "checkpoints"
    if extra:
        reference_dir = tmp_path / "reference"
        reference = Run(
            tmp_path, "reference", _flags(data_flags, reference_dir, *extra)
        )
        assert reference.wait() == 0, reference.stderr[-4000:]
    preempted = Run(
        tmp_path, "preempted", _flags(data_flags, model_dir, *extra)
    )
    _wait_for_checkpoint_after(checkpoints, 0, [preempted])
    seen = _signal_at_random_step(preempted, signal.SIGTERM, checkpoints)
    assert preempted.wait(120) == PREEMPTED_EXIT_CODE, preempted.stderr[-4000:]
    reason, step = _preempted_step(preempted.error_line(), str(checkpoints))
    assert reason == "SIGTERM"
    # The step the run was at, not the last periodic checkpoint.
    assert seen < step < NUM_STEPS, (seen, step)
    assert _checkpoint_steps(checkpoints)[-1] == step
    assert not (model_dir / "results.json").exists()
    resumed_from = step

    if not extra:
        # A second SIGTERM while the preemption save is under way.
        marker = tmp_path / "saving"
        twice = Run(
            tmp_path,
            "twice",
            [str(marker)] + _flags(data_flags, model_dir, *extra),
            script=SLOW_SAVE_DRIVER,
        )
        _wait_for_checkpoint_after(checkpoints, step, [twice])
        # At once: a later SIGTERM could come after the last step, when
        # there is no preemption save left to interrupt.
        _signal_at_random_step(twice, signal.SIGTERM, checkpoints, 0.0)
        deadline = time.time() + 120
        while not marker.exists() and twice.process.poll() is None:
            assert time.time() < deadline
            time.sleep(0.01)
        saving = int(marker.read_text())
        sent = time.time()
        twice.process.send_signal(signal.SIGTERM)
        assert twice.wait(60) == -signal.SIGTERM, twice.stderr[-4000:]
        assert time.time() - sent < 10
        resumed_from = _checkpoint_steps(checkpoints)[-1]
        assert step < resumed_from < saving, (step, resumed_from, saving)
        assert resumed_from % SAVE_EVERY == 0
        assert (checkpoints / f"ckpt-{saving}_temp").is_dir()

    rerun = Run(tmp_path, "rerun", _flags(data_flags, model_dir, *extra))
    assert rerun.wait() == 0, rerun.stderr[-4000:]
    _assert_resumed_to_the_reference(model_dir, reference_dir, resumed_from)


# With gradient accumulation too: checkpoints and the data skip count
# updates, each of which consumed its micro-batches.
@pytest.mark.parametrize(
    "extra", [(), ("--gradient_accumulation_steps=2",)], ids=["k1", "k2"]
)
@pytest.mark.large
def test_kill_9_then_rerun_resumes_and_matches_an_uninterrupted_run(
    tmp_path, data_flags, reference_dir, extra
):
    crashed_dir = tmp_path / "crashed"
    command = [sys.executable, PRETRAIN_SCRIPT] + _flags(
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
            if steps and steps[-1] >= SAVE_EVERY:
                break
            time.sleep(0.05)
        subprocesses.interrupt(process, signal.SIGKILL)
    finally:
        process.wait()
    assert process.returncode == -signal.SIGKILL
    assert not (crashed_dir / "results.json").exists()
    killed_at = _checkpoint_steps(crashed_dir / "checkpoints")[-1]
    assert SAVE_EVERY <= killed_at < NUM_STEPS

    resumed = run_script(
        PRETRAIN_SCRIPT, _flags(data_flags, crashed_dir, *extra)
    )
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    results = json.loads((crashed_dir / "results.json").read_text())
    assert results["global_step"] == NUM_STEPS
    # Resumed from a complete checkpoint at or after the one seen before the kill.
    assert results["resumed_from_step"] >= killed_at
    assert results["resumed_from_step"] % SAVE_EVERY == 0
    assert f"Resumed from {crashed_dir / 'checkpoints'}" in resumed.stdout

    reference_results = json.loads((reference_dir / "results.json").read_text())
    assert_same_training(results, reference_results)


def _start_workers(tmp_path, name, flags):
    return [
        Run(tmp_path, f"{name}_worker{index}", flags, TF_CONFIG=tf_config)
        for index, tf_config in enumerate(worker_tf_configs(2))
    ]


def _wait_all(runs, timeout=300):
    return [run.wait(timeout) for run in runs]


@pytest.mark.large
def test_two_workers_preempted_then_one_lost_resume_to_the_same_weights(
    tmp_path, data_flags
):
    extra = ("--strategy=multi_worker_mirrored",)
    reference_dir, model_dir = tmp_path / "reference", tmp_path / "model"
    checkpoints = model_dir / "checkpoints"
    reference = _start_workers(
        tmp_path, "reference", _flags(data_flags, reference_dir, *extra)
    )
    assert _wait_all(reference) == [0, 0], reference[1].stderr[-4000:]

    # SIGTERM to the second worker only: both stop after the same step.
    flags = _flags(data_flags, model_dir, *extra)
    preempted = _start_workers(tmp_path, "preempted", flags)
    _wait_for_checkpoint_after(checkpoints, 0, preempted)
    seen = _signal_at_random_step(preempted[1], signal.SIGTERM, checkpoints)
    codes = _wait_all(preempted, 120)
    assert codes == [PREEMPTED_EXIT_CODE] * 2, preempted[0].stderr[-4000:]
    reason, step = _preempted_step(preempted[1].error_line(), str(checkpoints))
    assert reason == "SIGTERM"
    assert _preempted_step(preempted[0].error_line(), str(checkpoints)) == (
        "another worker was asked to stop",
        step,
    )
    assert seen < step < NUM_STEPS, (seen, step)
    assert _checkpoint_steps(checkpoints)[-1] == step

    # The chief stops answering (a lost machine): the other worker ends.
    lost = _start_workers(tmp_path, "lost", flags)
    _wait_for_checkpoint_after(checkpoints, step, lost)
    _signal_at_random_step(lost[0], signal.SIGSTOP, checkpoints)
    frozen = time.time()
    try:
        assert lost[1].wait(120) == WORKER_LOST_EXIT_CODE, lost[1].stderr[
            -4000:
        ]
        # multi_worker.HEARTBEAT_TIMEOUT_SECONDS: about 20 s, on a loaded
        # 2-core machine a little more.
        assert time.time() - frozen < 60
    finally:
        lost[0].process.kill()
        lost[0].wait()
    resumed_from = _checkpoint_steps(checkpoints)[-1]
    assert resumed_from > step
    error = lost[1].error_line()
    assert error.startswith(
        "ERROR: A worker of this multi-worker run is gone or stopped "
        "answering ("
    ), error
    assert error.endswith(
        "A rerun resumes from the last complete checkpoint, "
        f"{checkpoints}/ckpt-{resumed_from} (step {resumed_from}). Rerun "
        "every worker with the same command."
    ), error

    rerun = _start_workers(tmp_path, "rerun", flags)
    assert _wait_all(rerun) == [0, 0], rerun[0].stderr[-4000:]
    _assert_resumed_to_the_reference(model_dir, reference_dir, resumed_from)
