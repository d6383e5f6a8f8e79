"""RoPE, ALiBi, KERPLE, FIRE and Shaw et al. from pre-training to export.

`scripts/pretrain.py` pre-trains with `--position_encoding=<option>`, the
preset is fine-tuned (`run_glue`) and exported in all three formats
(`export_preset`, what `scripts/finetune_glue.py` and `scripts/export.py`
run; those scripts have tests of their own in test_finetune.py and
test_export_lib.py), and a fresh process loads the exports: its encoder
output matches the preset's backbone.
"""

import json
import subprocess
import sys

import numpy as np
import pytest

from tests.training.conftest import PRETRAIN_SCRIPT
from tests.training.conftest import SEQ_LENGTH
from tests.training.conftest import TINY_MODEL_FLAGS
from tests.training.conftest import run_script
from tests.training.conftest import subprocess_env

pytestmark = pytest.mark.large

# Runs in a fresh process: loads each option's three exports with TensorFlow
# alone (one process for all options: a start-up costs more than a load).
_LOAD_EXPORTS = """
import sys
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401 (registers the preprocessor's ops)

texts = tf.constant(["the history of the city", "music and art"])
arguments = sys.argv[1:]
preprocessors = {}  # The options share one: loaded once.
for start in range(0, len(arguments), 4):
    serving, encoder, preprocessor, out = arguments[start : start + 4]
    served = tf.saved_model.load(serving).signatures["serving_default"](
        text=texts
    )
    if preprocessor not in preprocessors:
        preprocessors[preprocessor] = tf.saved_model.load(preprocessor)
    inputs = preprocessors[preprocessor](texts)
    encoded = tf.saved_model.load(encoder)(inputs)
    np.savez(
        out,
        pooled=encoded["pooled_output"].numpy(),
        served_pooled=served["pooled_output"].numpy(),
        **{k: v.numpy() for k, v in inputs.items()},
    )
"""

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


def _pretrain_finetune_export(
    option, root, data_flags, glue_dir, preprocessor_export=None
):
    """Pre-trains `option` with the script, fine-tunes and exports its
    preset (the hub preprocessor only where `preprocessor_export` is None:
    every option's preset has the same tokenizer and length); returns what
    the test checks."""
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

    from tupe_tf.export import export_preset
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
    formats = ["serving", "hub_encoder"]
    if preprocessor_export is None:
        formats.append("hub_preprocessor")
    exports = [
        export_preset(
            preset,
            str(root / export_format),
            export_format,
            seq_length=SEQ_LENGTH,
        )
        for export_format in formats
    ]
    preprocessor_export = preprocessor_export or exports[-1]
    exports = exports[:2] + [preprocessor_export]
    return dict(
        model_dir=model_dir,
        preset=preset,
        glue=glue,
        exports=exports,
        preprocessor=preprocessor_export,
        outputs=str(root / "outputs.npz"),
    )


@pytest.fixture(scope="module")
def option_runs(tmp_path_factory, data_flags, sentiment_glue_dir):
    """Option -> `_pretrain_finetune_export`'s result, the exports loaded in
    a fresh process."""
    runs = {}
    for option in OPTIONS:
        shared = runs[OPTIONS[0]]["preprocessor"] if runs else None
        runs[option] = _pretrain_finetune_export(
            option,
            tmp_path_factory.mktemp(option),
            data_flags,
            sentiment_glue_dir,
            shared,
        )
    loaded = subprocess.run(
        [sys.executable, "-c", _LOAD_EXPORTS]
        + [
            path
            for run in runs.values()
            for path in run["exports"] + [run["outputs"]]
        ],
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    return runs


@pytest.mark.parametrize("option", OPTIONS)
def test_pretrain_script_finetune_and_export(option, option_runs):
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

    outputs = np.load(run["outputs"])
    backbone = tupe_tf.TupeBackbone.from_preset(run["preset"])
    assert backbone.position_encoding == option
    expected = backbone(
        {
            "token_ids": outputs["input_word_ids"],
            "segment_ids": outputs["input_type_ids"],
            "padding_mask": outputs["input_mask"],
        }
    )["pooled_output"]
    np.testing.assert_allclose(outputs["pooled"], expected, atol=1e-5)
    np.testing.assert_allclose(outputs["served_pooled"], expected, atol=1e-5)
