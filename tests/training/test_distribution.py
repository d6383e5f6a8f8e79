"""Strategy factory: CPU branches in-process, mirrored on 2 logical CPUs in
subprocesses (devices must be split before TensorFlow starts), TPU branch
without a TPU."""

import json

import pytest
import tensorflow as tf

from tests.training.conftest import PRETRAIN_SCRIPT
from tests.training.conftest import TINY_MODEL_FLAGS
from tests.training.conftest import run_script
from tupe_tf.training import distribution


def test_default_and_one_device_strategies():
    assert distribution.create_strategy("default").num_replicas_in_sync == 1
    one = distribution.create_strategy("one_device")
    assert isinstance(one, tf.distribute.OneDeviceStrategy)
    assert distribution.is_chief(one)


def test_unknown_strategy_is_refused():
    with pytest.raises(ValueError, match="--strategy='gpu'"):
        distribution.create_strategy("gpu")


def test_tpu_branch_without_a_tpu_says_so():
    with pytest.raises(
        RuntimeError, match="--strategy=tpu: could not reach TPU 'local'"
    ):
        distribution.create_strategy("tpu", tpu="local")


def test_logical_cpus_after_tf_started_is_a_clear_error():
    tf.constant(1.0) + 1.0  # TensorFlow is initialised from here on.
    with pytest.raises(RuntimeError, match="TensorFlow is already initialised"):
        distribution.configure_logical_cpus(3)


def test_per_replica_batch_size():
    strategy = tf.distribute.get_strategy()
    assert distribution.per_replica_batch_size(32, strategy) == 32
    with pytest.raises(ValueError, match="--global_batch_size=0"):
        distribution.per_replica_batch_size(0, strategy)


def _mirrored_flags(data_flags, model_dir, *extra):
    return (
        TINY_MODEL_FLAGS
        + data_flags
        + [
            f"--model_dir={model_dir}",
            "--strategy=mirrored",
            "--num_cpu_devices=2",
            "--num_train_steps=16",
            "--save_every=8",
            "--eval_every=8",
            "--eval_steps=2",
            "--learning_rate=2e-3",
            "--warmup_steps=2",
        ]
        + list(extra)
    )


@pytest.mark.parametrize(
    "devices, expected",
    [
        (None, True),  # no strategy in scope
        (("CPU:0",), True),
        (("CPU:0", "CPU:1"), False),  # MirroredStrategy on logical CPUs
        (("GPU:0", "GPU:1"), True),
        (("TPU:0", "TPU:1"), True),
    ],
)
def test_xla_by_default_but_for_replicas_on_cpus(
    monkeypatch, devices, expected
):
    """The real strategies run in the mirrored and multi-worker tests; here
    the rule, with the strategy in scope replaced by its devices."""
    import types

    from tupe_tf.training.config import RuntimeConfig

    if devices is not None:
        names = tuple(
            f"/job:localhost/replica:0/task:0/device:{d}" for d in devices
        )
        strategy = types.SimpleNamespace(
            extended=types.SimpleNamespace(worker_devices=names)
        )
        monkeypatch.setattr(tf.distribute, "has_strategy", lambda: True)
        monkeypatch.setattr(tf.distribute, "get_strategy", lambda: strategy)
    assert distribution.jit_compile(RuntimeConfig()) is expected
    assert distribution.jit_compile(RuntimeConfig(jit_compile=False)) is False
    assert distribution.jit_compile(RuntimeConfig(jit_compile=True)) is True


@pytest.mark.large
def test_mirrored_on_two_logical_cpus_trains(tmp_path, data_flags):
    run = run_script(
        PRETRAIN_SCRIPT,
        _mirrored_flags(data_flags, tmp_path / "m", "--global_batch_size=8"),
    )
    assert run.returncode == 0, run.stderr[-4000:]
    results = json.loads((tmp_path / "m" / "results.json").read_text())
    assert results["num_replicas"] == 2
    assert results["global_step"] == 16
    losses = results["history_this_run"]["loss"]
    assert losses[-1] < losses[0], losses
    assert len(results["history_this_run"]["val_loss"]) == 2


@pytest.mark.large
@pytest.mark.parametrize(
    "flag, message",
    [
        (
            "--global_batch_size=7",
            "--global_batch_size=7 is not divisible by the number of replicas (2)",
        ),
        (
            "--steps_per_execution=2",
            "--steps_per_execution=2 is not supported with --strategy=mirrored",
        ),
    ],
)
def test_mirrored_refuses_bad_batch_and_steps_per_execution(
    tmp_path, data_flags, flag, message
):
    args = _mirrored_flags(data_flags, tmp_path / "m", "--global_batch_size=8")
    run = run_script(PRETRAIN_SCRIPT, args + [flag])
    assert run.returncode == 2
    assert message in run.stderr
    assert not (tmp_path / "m" / "checkpoints").exists()
