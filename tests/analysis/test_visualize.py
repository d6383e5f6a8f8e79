import os

import numpy as np
import pytest

from tests.figure_check import assert_png_shows
from tests.test_case import tiny_backbone
from tupe_tf.analysis import figures
from tupe_tf.analysis import visualize


def _preset(tmp_path, option):
    backbone = tiny_backbone(option, vocabulary_size=60, max_sequence_length=32)
    path = str(tmp_path / option)
    backbone.save_to_preset(path)
    return path, backbone


def test_visualize_preset_writes_both_figures(tmp_path):
    tupe, tupe_backbone = _preset(tmp_path, "tupe-a")
    bert, bert_backbone = _preset(tmp_path, "bert")
    paths = visualize.visualize_preset(
        tupe,
        str(tmp_path / "figures"),
        sequence_length=24,
        baseline_presets=[bert],
        seed=3,
    )
    assert [os.path.basename(p) for p in paths] == [
        "positional_bias.png",
        "attention_rank.png",
    ]
    # Each PNG shows the figure of the saved models' numbers: the bias of
    # the first preset, the ranks of both on the seed's inputs.
    assert_png_shows(
        paths[0], figures.positional_bias_figure(tupe_backbone, 24)
    )
    ranks = {
        name: figures.attention_ranks(
            backbone, visualize.random_inputs(backbone, 24, seed=3)
        )
        for name, backbone in (
            ("tupe-a", tupe_backbone),
            ("bert", bert_backbone),
        )
    }
    assert_png_shows(paths[1], figures.attention_ranks_figure(ranks))


def test_rank_with_positions_at_input_is_bounded_by_head_size(tmp_path):
    _, backbone = _preset(tmp_path, "bert")
    ranks = figures.attention_ranks(
        backbone, visualize.random_inputs(backbone, 24)
    )
    assert ranks["head_dim"] == 8
    assert np.all(ranks["content"] <= 8)
    np.testing.assert_allclose(ranks["content"], ranks["with_bias"])


@pytest.mark.large
def test_script_flags_come_from_the_config(tmp_path):
    import subprocess
    import sys

    repo = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
    alibi, _ = _preset(tmp_path, "alibi")
    env = dict(os.environ, PYTHONPATH=repo, TF_CPP_MIN_LOG_LEVEL="2")
    script = os.path.join(repo, "scripts", "visualize.py")
    run = subprocess.run(
        [sys.executable, script, f"--preset={alibi}", "--sequence_length=12"],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    default_dir = visualize.VisualizeConfig(preset=alibi).figures_dir()
    assert f"wrote {os.path.join(default_dir, 'positional_bias.png')}" in (
        run.stdout
    )
    missing = subprocess.run(
        [sys.executable, script],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert missing.returncode != 0 and "--preset" in missing.stderr
