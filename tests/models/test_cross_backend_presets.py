"""Same weights, same numbers: a preset saved on one Keras backend loads on
the others and gives the same `sequence_output` and masked-LM logits.

Every position encoding (and per-head segments, a RoPE scaling) is saved on
the backend this test runs under and loaded in one subprocess per other
backend; the first of them saves its own presets, which this process and
the last backend load back. Cases run in `preset_worker.py`.
"""

import os

import keras
import numpy as np
import pytest

from tests.models import preset_worker
from tests.test_case import every_backend
from tests.training.conftest import run_script

pytestmark = [pytest.mark.large, every_backend]

WORKER = preset_worker.__file__
BACKENDS = ("tensorflow", "jax", "torch")
HERE = keras.backend.backend()
FIRST, SECOND = (b for b in BACKENDS if b != HERE)
CASES = list(preset_worker.cases())


def _run_worker(backend, *args):
    run = run_script(WORKER, args, timeout=600, KERAS_BACKEND=backend)
    assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
    assert f"backend {backend}" in run.stdout


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """`(saved_on, loaded_on)` -> `(saved outputs, loaded outputs)`."""
    root = tmp_path_factory.mktemp("cross_backend")
    here, first = str(root / HERE), str(root / FIRST)

    def path(name):
        return str(root / f"{name}.npz")

    preset_worker.save(here)
    _run_worker(FIRST, "load", here, path("first_from_here"), "save", first)
    _run_worker(
        SECOND,
        *("load", here, path("second_from_here")),
        *("load", first, path("second_from_first")),
    )
    preset_worker.load(first, path("here_from_first"))

    def saved(directory):
        return dict(np.load(os.path.join(directory, "outputs.npz")))

    return {
        (HERE, FIRST): (saved(here), dict(np.load(path("first_from_here")))),
        (HERE, SECOND): (saved(here), dict(np.load(path("second_from_here")))),
        (FIRST, HERE): (saved(first), dict(np.load(path("here_from_first")))),
        (FIRST, SECOND): (
            saved(first),
            dict(np.load(path("second_from_first"))),
        ),
    }


def _check(saved, loaded, case):
    for name, outputs in (("saved", saved), ("loaded", loaded)):
        error = outputs.get(f"{case}/error")
        assert error is None, f"{case} failed when {name}:\n{error}"
    assert str(loaded[f"{case}/class"]) == "TupeMaskedLM"
    options = preset_worker.cases()[case]
    assert str(loaded[f"{case}/options"]) == repr(
        {k: options[k] for k in sorted(options)}
    )
    for key in ("sequence_output", "logits"):
        expected = saved[f"{case}/{key}"]
        actual = loaded[f"{case}/{key}"]
        scale = max(1.0, float(np.abs(expected).max()))
        # float32 round-off of different kernels (oneDNN, XLA, ATen).
        np.testing.assert_allclose(
            actual, expected, rtol=0, atol=1e-5 * scale, err_msg=key
        )


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize(
    "direction",
    [(HERE, FIRST), (HERE, SECOND), (FIRST, HERE), (FIRST, SECOND)],
    ids="{0[0]}_to_{0[1]}".format,
)
def test_preset_gives_the_same_outputs_on_another_backend(
    results, direction, case
):
    _check(*results[direction], case)
