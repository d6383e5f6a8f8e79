"""`TupeMaskedLM.fit` on the shards' `tf.data` reader trains on JAX and
PyTorch as on TensorFlow, and under JAX's `DataParallel` as on one device.

The same NumPy weights and batches (`training_worker.py`) make the per-step
losses and final weights of the backends comparable to float32 round-off:
the backends train the same model, not merely some model.
"""

import keras
import numpy as np
import pytest

from tests.models import training_worker
from tests.test_case import every_backend
from tests.training.conftest import corpus_file  # noqa: F401 - fixture
from tests.training.conftest import data_dir  # noqa: F401 - fixture
from tests.training.conftest import run_script
from tests.training.conftest import shards  # noqa: F401 - fixture
from tests.training.conftest import vocab_file  # noqa: F401 - fixture

pytestmark = [pytest.mark.large, every_backend]

HERE = keras.backend.backend()


@pytest.fixture(scope="module")
def runs(shards, vocab_file, tmp_path_factory):  # noqa: F811 - fixtures
    """Backend -> `training_worker.run`'s results; TensorFlow in-process
    when the tests run on it, JAX with two CPU devices."""
    root = tmp_path_factory.mktemp("backend_training")
    modes = {
        "tensorflow": ["single"],
        "jax": ["single", "data_parallel", "shuffled"],
        "torch": ["single", "shuffled"],
    }
    results = {}
    for backend, backend_modes in modes.items():
        args = [shards["train"], vocab_file]
        if backend == HERE == "tensorflow":
            results[backend] = training_worker.run(*args, backend_modes)
            continue
        out = str(root / f"{backend}.npz")
        run = run_script(
            training_worker.__file__,
            args + [out] + backend_modes,
            timeout=600,
            KERAS_BACKEND=backend,
            XLA_FLAGS="--xla_force_host_platform_device_count=2",
        )
        assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
        assert f"backend {backend}" in run.stdout
        results[backend] = dict(np.load(out))
    return results


def _weights(results, mode, kind="weights"):
    prefix = f"{mode}/{kind}_"
    return [
        results[f"{prefix}{i}"]
        for i in range(sum(key.startswith(prefix) for key in results))
    ]


def assert_same_training(actual, expected, mode, relative):
    """Each weight's difference is below `relative` times how far training
    moved it: Adam normalizes updates, so round-off in a tiny gradient can
    move a single weight by a fraction of the learning rate.

    A weight without a gradient (the pooler: the masked LM does not use it)
    does not move on TensorFlow and PyTorch; on JAX its gradient is zeros,
    so AdamW's weight decay shrinks it by at most `lr * decay` a step.
    """
    trained = zip(
        _weights(actual, mode),
        _weights(expected, "single"),
        _weights(expected, "single", "initial"),
    )
    for i, (got, want, initial) in enumerate(trained):
        moved = np.linalg.norm(want - initial)
        if moved == 0:
            np.testing.assert_allclose(got, want, rtol=1e-3, err_msg=str(i))
        else:
            assert np.linalg.norm(got - want) <= relative * moved, (i, moved)


@pytest.mark.parametrize(
    "backend, mode",
    [
        ("tensorflow", "single"),
        ("jax", "shuffled"),
        ("jax", "data_parallel"),
        ("torch", "shuffled"),
    ],
)
def test_fit_lowers_the_loss(runs, backend, mode):
    results = runs[backend]
    losses = results[f"{mode}/losses"]
    assert len(losses) == training_worker.STEPS
    assert np.isfinite(losses).all()
    before, after = results[f"{mode}/before"], results[f"{mode}/after"]
    assert after < before - 0.1, (before, after)


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_backends_train_the_same_numbers_as_tensorflow(runs, backend):
    expected, actual = runs["tensorflow"], runs[backend]
    # Round-off of different kernels, grown over the steps (1.1e-5 seen).
    np.testing.assert_allclose(
        actual["single/losses"], expected["single/losses"], rtol=1e-4
    )
    # Measured: at most 2.6% of the movement, for JAX and PyTorch alike.
    assert_same_training(actual, expected, "single", relative=5e-2)


def test_data_parallel_keeps_replicas_equal_and_matches_one_device(runs):
    jax = runs["jax"]
    assert int(jax["data_parallel/devices"]) == 2
    assert float(jax["data_parallel/replicas"]) == 0.0
    np.testing.assert_allclose(
        jax["data_parallel/losses"], jax["single/losses"], rtol=1e-6
    )
    # Measured: at most 1.4e-4 of the movement.
    assert_same_training(jax, jax, "data_parallel", relative=1e-3)
