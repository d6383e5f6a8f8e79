"""`--gradient_accumulation_steps`: k micro-batches against one batch k
times as large (dropout 0), on one device in-process and under
`MirroredStrategy` on 2 logical CPU devices in a subprocess."""

import json
import subprocess
import sys

import pytest
import tensorflow as tf

from tests.training.accumulation_worker import weight_difference
from tests.training.conftest import PRETRAIN_SCRIPT
from tests.training.conftest import REPO
from tests.training.conftest import assert_refused
from tests.training.conftest import run_script
from tests.training.conftest import subprocess_env
from tupe_tf.training import distribution
from tupe_tf.training.config import PretrainConfig
from tupe_tf.training.pretrain import validate_settings

# float32 round-off of the tiny model's weights after a few updates;
# `moved` (how far the updates took them) is five orders larger.
ROUND_OFF = 1e-6


@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
def test_accumulation_equals_the_larger_batch_on_one_device(jit_compile):
    result = weight_difference(
        tf.distribute.get_strategy(), jit_compile=jit_compile
    )
    assert result["moved"] > 1e-3
    assert result["difference"] < ROUND_OFF


def test_batch_per_replica_that_k_does_not_divide_is_refused(tmp_path):
    config = PretrainConfig(
        model_dir=str(tmp_path),
        train_files=["unused"],
        global_batch_size=6,
        gradient_accumulation_steps=4,
    )
    with pytest.raises(
        ValueError, match=r"--gradient_accumulation_steps=4 does not divide"
    ):
        validate_settings(config, tf.distribute.get_strategy())
    assert (
        distribution.micro_batch_size(8, tf.distribute.get_strategy(), 4) == 2
    )


@pytest.mark.large
def test_accumulation_equals_the_larger_batch_under_mirrored_strategy():
    completed = subprocess.run(
        [sys.executable, "-m", "tests.training.accumulation_worker"],
        cwd=REPO,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    results = json.loads(completed.stdout.strip().splitlines()[-1])
    assert set(results) == {"fit", "fit_mixed_float16", "loop"}
    for case, result in results.items():
        assert result["moved"] > 1e-3, case
    assert results["fit"]["difference"] < ROUND_OFF
    assert results["loop"]["difference"] < ROUND_OFF
    # float16 activations: round-off of float16, far below the step.
    assert results["fit_mixed_float16"]["difference"] < 1e-4


@pytest.mark.large
def test_script_refuses_a_batch_per_replica_k_does_not_divide(tmp_path):
    run = run_script(
        PRETRAIN_SCRIPT,
        [
            f"--model_dir={tmp_path / 'm'}",
            "--train_files=unused",
            "--global_batch_size=8",
            "--gradient_accumulation_steps=3",
        ],
    )
    assert_refused(
        run,
        "--gradient_accumulation_steps=3 does not divide",
        "(8 of --global_batch_size=8)",
    )
    assert not (tmp_path / "m").exists()
