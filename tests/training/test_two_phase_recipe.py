"""The BERT-base recipe of docs/training.md at tiny dims, through the script.

Phase 1 pre-trains at length 32, phase 2 starts a new run from phase 1's
preset (`--init_from`) at length 64, both with the recipe's gradient
accumulation, `mixed_bfloat16`, whole-word masking and LAMB. Phase 1 adds
XLA (`--jit_compile`) on one device, phase 2 `MirroredStrategy` on 2 logical
CPU devices: XLA fails under `MirroredStrategy` on logical CPU devices
("Trying to access resource ... located in device CPU:1 from device CPU:0",
TensorFlow's XLA known issue of variables on another device). A phase 2
whose dims do not fit the preset is refused with one `ERROR:` line.
"""

import json
import math
import os

import pytest

from tests.data_pipeline.conftest import shard_config
from tests.training.conftest import PRETRAIN_SCRIPT
from tests.training.conftest import assert_refused
from tests.training.conftest import run_script

pytestmark = pytest.mark.large

RECIPE_FLAGS = [
    "--global_batch_size=8",
    "--gradient_accumulation_steps=2",
    "--mixed_precision=mixed_bfloat16",
    "--whole_word_masking",
    "--optimizer=lamb",
    "--learning_rate=1e-3",
    "--warmup_steps=1",
    "--num_train_steps=4",
    "--save_every=2",
    "--eval_steps=2",
    "--shuffle_buffer=64",
    "--verbose=2",
    "--num_layers=2",
    "--num_heads=2",
    "--hidden_dim=32",
    "--intermediate_dim=64",
]

PHASE1_FLAGS = ["--jit_compile"]
PHASE2_FLAGS = ["--strategy=mirrored", "--num_cpu_devices=2"]


@pytest.fixture(scope="module")
def long_shards(tmp_path_factory, corpus_file, vocab_file):
    """Shards of length 64 (phase 2's): one to train, one to evaluate."""
    import data_pipeline

    output_dir = str(tmp_path_factory.mktemp("long_shards"))
    config = shard_config(
        corpus_file,
        vocab_file,
        output_dir,
        max_seq_length=64,
        num_shards=2,
        lowercase=True,
    )
    data_pipeline.build_shards(config)
    return sorted(
        os.path.join(output_dir, name)
        for name in os.listdir(output_dir)
        if ".tfrecord" in name
    )


def _phase(model_dir, train, evaluate, vocab_file, length, *flags):
    return run_script(
        PRETRAIN_SCRIPT,
        RECIPE_FLAGS
        + [
            f"--model_dir={model_dir}",
            f"--train_files={train}",
            f"--eval_files={evaluate}",
            f"--vocab_file={vocab_file}",
            f"--seq_length={length}",
            f"--max_sequence_length={length}",
            *flags,
        ],
        timeout=600,
    )


def test_two_phases_at_128_then_512_in_small(
    tmp_path, shards, long_shards, vocab_file
):
    phase1 = tmp_path / "phase1"
    run = _phase(
        phase1, shards["train"], shards["eval"], vocab_file, 32, *PHASE1_FLAGS
    )
    assert run.returncode == 0, run.stderr[-4000:]
    preset = phase1 / "preset"

    refused = tmp_path / "refused"
    run = _phase(
        refused,
        *long_shards,
        vocab_file,
        64,
        f"--init_from={preset}",
        "--hidden_dim=64",
        *PHASE2_FLAGS,
    )
    assert_refused(
        run,
        f"--init_from='{preset}': the preset's hidden_dim is 32, this run's "
        "(--model_size, --hidden_dim) is 64.",
    )
    assert not refused.exists()

    phase2 = tmp_path / "phase2"
    run = _phase(
        phase2,
        *long_shards,
        vocab_file,
        64,
        f"--init_from={preset}",
        *PHASE2_FLAGS,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    assert f"Initialised from {preset}" in run.stdout
    results = json.loads((phase2 / "results.json").read_text())
    # A new run: its own step counter, from phase 1's weights, tables grown.
    assert results["global_step"] == 4
    assert results["resumed_from_step"] == 0
    assert results["num_replicas"] == 2
    assert math.isfinite(results["eval"]["loss"])
    assert results["init_from"] == {
        "preset": str(preset),
        "kind": "tupe-tf",
        "position_encoding": "tupe-r",
        "max_sequence_length": 32,
        "trained_length": 32,
        "grown_tables": {"untied_position_bias/position_embeddings": [32, 64]},
        "new_variables": [],
    }
    backbone = json.loads((phase2 / "preset" / "config.json").read_text())
    assert backbone["config"]["max_sequence_length"] == 64
    phase1_results = json.loads((phase1 / "results.json").read_text())
    assert phase1_results["init_from"] is None
