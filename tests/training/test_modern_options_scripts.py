"""RoPE, ALiBi, KERPLE, FIRE and Shaw et al. from pre-training to
fine-tuning.

`scripts/pretrain.py` pre-trains with `--position_encoding=<option>` and
its preset is fine-tuned (`run_glue`, what `scripts/finetune_glue.py` runs:
its own tests are in test_finetune.py). Every option's exports in the
three formats, loaded in a fresh process, are tested in
tests/export/test_rope_alibi_exports.py.
"""

import json

import numpy as np
import pytest

from tests.training.conftest import PRETRAIN_SCRIPT
from tests.training.conftest import SEQ_LENGTH
from tests.training.conftest import TINY_MODEL_FLAGS
from tests.training.conftest import run_script

pytestmark = pytest.mark.large

# The options with a position layer of their own; sinusoidal and nope
# change only the input side, whose exports test_rope_alibi_exports.py
# reloads.
OPTIONS = ["rope", "alibi", "kerple-log", "fire", "shaw"]


@pytest.fixture(scope="module")
def sentiment_glue_dir(tmp_path_factory):
    """A learnable SST-2-layout task: positive iff the sentence says good."""
    root = tmp_path_factory.mktemp("glue_sst2")
    (root / "SST-2").mkdir()
    for split, n in (("train", 64), ("dev", 16)):
        lines = ["sentence\tlabel"]
        for i in range(n):
            word = "good" if i % 2 else "bad"
            lines.append(f"the film was {word} .\t{i % 2}")
        (root / "SST-2" / f"{split}.tsv").write_text("\n".join(lines) + "\n")
    return str(root)


def _pretrain_and_finetune(option, root, data_flags, glue_dir):
    """Pre-trains `option` with the script and fine-tunes its preset;
    returns what the test checks."""
    model_dir = root / "model"
    run = run_script(
        PRETRAIN_SCRIPT,
        TINY_MODEL_FLAGS
        + data_flags
        + [
            f"--position_encoding={option}",
            f"--model_dir={model_dir}",
            "--num_train_steps=4",
            "--save_every=2",
            "--eval_steps=1",
            "--global_batch_size=8",
            "--learning_rate=1e-3",
        ],
    )
    assert run.returncode == 0, run.stderr[-3000:]
    preset = str(model_dir / "preset")

    from tupe_tf.training.config import GlueConfig
    from tupe_tf.training.finetune import run_glue

    glue = run_glue(
        GlueConfig(
            task="sst2",
            preset=preset,
            glue_dir=glue_dir,
            output_dir=str(root / "glue"),
            learning_rates=[1e-3],
            seeds=[0],
            num_epochs=1,
            seq_length=SEQ_LENGTH,
            batch_size=16,
            verbose=0,
        ).replace(runtime=dict(jit_compile=False))
    )
    return dict(model_dir=model_dir, preset=preset, glue=glue)


@pytest.fixture(scope="module")
def option_runs(tmp_path_factory, data_flags, sentiment_glue_dir):
    """Option -> `_pretrain_and_finetune`'s result."""
    return {
        option: _pretrain_and_finetune(
            option,
            tmp_path_factory.mktemp(option),
            data_flags,
            sentiment_glue_dir,
        )
        for option in OPTIONS
    }


@pytest.mark.parametrize("option", OPTIONS)
def test_pretrain_script_then_finetune(option, option_runs):
    run = option_runs[option]
    results = json.loads((run["model_dir"] / "results.json").read_text())
    assert results["global_step"] == 4
    assert np.isfinite(results["eval"]["loss"])
    config = json.loads(
        (run["model_dir"] / "checkpoints" / "run.json").read_text()
    )
    assert config["model"]["position_encoding"] == option
    evaluation = run["glue"]["runs"][0]["evaluation"]
    accuracy = evaluation[next(iter(evaluation))]["accuracy"]
    # A share of the 16 evaluation sentences, each counted once.
    assert 0.0 <= accuracy <= 1.0
    assert accuracy * 16 == pytest.approx(round(accuracy * 16), abs=1e-5)

    import tupe_tf

    backbone = tupe_tf.TupeBackbone.from_preset(run["preset"])
    assert backbone.position_encoding == option
