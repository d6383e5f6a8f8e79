import os

import matplotlib.pyplot as plt
import numpy as np
import pytest

from tests.figure_check import assert_png_shows
from tests.test_case import tiny_backbone
from tupe_tf.analysis import figures


def test_numerical_ranks_of_known_matrices():
    rng = np.random.default_rng(0)
    low = rng.normal(size=(2, 12, 3)) @ rng.normal(size=(2, 3, 12))
    full = rng.normal(size=(12, 12))
    assert list(figures.numerical_ranks(low)) == [3, 3]
    assert figures.numerical_ranks(full[None])[0] == 12


@pytest.mark.parametrize(
    "option, drawn_layers",
    [("diet-rel", 2), ("tupe-r", 1), ("bert", 1), ("alibi", 1), ("rope", 1)],
)
def test_positional_bias_figure_draws_the_bias(option, drawn_layers):
    backbone = tiny_backbone(option)
    bias = backbone.positional_bias(8)
    fig = figures.positional_bias_figure(backbone, 8)
    try:
        axes = [ax for ax in fig.axes if ax.images]
        assert len(axes) == drawn_layers * 2
        for index, ax in enumerate(axes):
            layer, head = divmod(index, 2)
            np.testing.assert_array_equal(
                np.asarray(ax.images[0].get_array()), bias[layer, head]
            )
    finally:
        plt.close(fig)


def test_positional_bias_png_is_written(tmp_path):
    backbone = tiny_backbone("diet-rel")
    path = figures.plot_positional_bias(backbone, 8, str(tmp_path / "b.png"))
    # The PNG shows the figure of the bias checked above, pixel for pixel.
    assert_png_shows(path, figures.positional_bias_figure(backbone, 8))
    assert os.listdir(tmp_path) == ["b.png"]


def test_attention_ranks_figure_draws_the_ranks():
    ranks = {
        "a": {
            "content": np.array([3.0, 4.0]),
            "with_bias": np.array([7.0, 8.0]),
            "head_dim": 4,
            "sequence_length": 8,
        },
        "b": {
            "content": np.array([1.0, 2.0]),
            "with_bias": np.array([5.0, 6.0]),
            "head_dim": 4,
            "sequence_length": 8,
        },
    }
    fig = figures.attention_ranks_figure(ranks)
    try:
        heights = [
            [bar.get_height() for bar in container]
            for container in fig.axes[0].containers
        ]
    finally:
        plt.close(fig)
    assert heights == [[3, 4], [7, 8], [1, 2], [5, 6]]


def test_glue_chart_draws_the_medians_and_the_control(tmp_path):
    from tupe_tf.analysis import study_figures

    def row(median, low, high):
        return {
            "metric": "accuracy",
            "learning_rate": 1e-3,
            "score": {"median": median, "low": low, "high": high},
        }

    glue = {
        "sst2": {
            "no-pretraining": row(0.784, 0.774, 0.793),
            "bert": row(0.79, 0.785, 0.80),
            "tupe-r": row(0.81, 0.80, 0.82),
        }
    }
    figure = study_figures.draw_glue(glue)
    ax = figure.axes[0]
    points = [line for line in ax.lines if line.get_marker() == "o"]
    np.testing.assert_allclose(points[0].get_ydata(), [0.79, 0.81])
    control = [line for line in ax.lines if line.get_label().startswith("no")]
    np.testing.assert_allclose(control[0].get_ydata(), [0.784, 0.784])
    # Points, not bars: the axis zooms to the scores instead of starting at 0.
    assert ax.get_ylim()[0] > 0.7
    plt.close(figure)
    path = study_figures.plot_glue(glue, str(tmp_path / "glue.png"))
    assert_png_shows(path, study_figures.draw_glue(glue))
