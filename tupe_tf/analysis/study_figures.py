"""Figures of the comparison study, drawn from the per-run JSON files."""

import numpy as np

from tupe_tf.analysis import study_stats
from tupe_tf.analysis.plotting import pyplot
from tupe_tf.analysis.plotting import save_figure
from tupe_tf.analysis.study_beyond_table import SCALED_KEY
from tupe_tf.analysis.study_findings_markdown import evaluation_name
from tupe_tf.analysis.study_findings_markdown import task_name

# Fixed metadata: the same JSON files give the same PNG bytes.
_METADATA = {"Software": None}


def _colors(order):
    cmap = pyplot().get_cmap("tab10" if len(order) <= 10 else "tab20")
    return {name: cmap(i % cmap.N) for i, name in enumerate(order)}


def plot_loss_bands(pretrain, order, path):
    """`draw_loss_bands` saved as a PNG at `path`; returns `path`."""
    return save_figure(
        draw_loss_bands(pretrain, order), path, metadata=_METADATA
    )


def draw_loss_bands(pretrain, order):
    """Validation loss per variant: median over seeds (one line per variant,
    labelled `<variant> (n=<seeds>)`), min-max band, log-x. Returns the
    figure."""
    colors = _colors(order)
    fig, ax = pyplot().subplots(figsize=(8, 5))
    for variant in order:
        runs = [r for r in pretrain if r["variant"] == variant]
        if not runs:
            continue
        steps = runs[0]["curve"]["steps"]
        losses = np.array(
            [
                r["curve"]["val_loss"]
                for r in runs
                if len(r["curve"]["val_loss"]) == len(steps)
            ]
        )
        if not losses.size:
            continue
        ax.plot(
            steps,
            np.median(losses, axis=0),
            color=colors[variant],
            label=f"{variant} (n={len(losses)})",
            linewidth=1.4,
        )
        if len(losses) > 1:
            ax.fill_between(
                steps,
                losses.min(axis=0),
                losses.max(axis=0),
                color=colors[variant],
                alpha=0.2,
                linewidth=0,
            )
    ax.set_xscale("log")
    ax.set_xlabel("pre-training step (log scale)")
    ax.set_ylabel("validation MLM loss (Keras: mean over prediction slots)")
    ax.set_title("Validation MLM loss: median over seeds, band = min-max")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    return fig


def _plot_scaled_rope(ax, pretrain, colors):
    """Dashed median lines of the rope models evaluated with a scaling."""
    runs = [r for r in pretrain if SCALED_KEY in r]
    styles = {"linear": "--", "ntk": "-.", "yarn": ":"}
    for scaling in runs[0][SCALED_KEY] if runs else []:
        lengths = sorted(int(n) for n in runs[0][SCALED_KEY][scaling])
        median = [
            study_stats.spread(
                [r[SCALED_KEY][scaling].get(str(n)) for r in runs]
            )["median"]
            for n in lengths
        ]
        ax.plot(
            lengths,
            median,
            color=colors["rope"],
            linestyle=styles.get(scaling, "--"),
            marker="x",
            markersize=3,
            label=f"rope + {scaling}",
        )


def plot_extrapolation(pretrain, order, seq_length, path):
    """`draw_extrapolation` saved as a PNG at `path`; returns `path`."""
    return save_figure(
        draw_extrapolation(pretrain, order, seq_length),
        path,
        metadata=_METADATA,
    )


def draw_extrapolation(pretrain, order, seq_length):
    """Held-out loss against evaluation length: per variant its median over
    seeds with min-max bars (an errorbar labelled with the variant, x
    shifted a little per variant so bars do not overlap), and the rope
    models with each scaling dashed. Returns the figure."""
    colors = _colors(order)
    fig, ax = pyplot().subplots(figsize=(7, 4.5))
    for index, variant in enumerate(order):
        runs = [r for r in pretrain if r["variant"] == variant]
        if not runs:
            continue
        lengths = sorted(int(n) for n in runs[0]["heldout_loss_by_length"])
        spreads = [
            study_stats.spread(
                [r["heldout_loss_by_length"].get(str(n)) for r in runs]
            )
            for n in lengths
        ]
        x = np.array(lengths) * (1 + 0.01 * (index - len(order) / 2))
        median = np.array([s["median"] for s in spreads])
        ax.errorbar(
            x,
            median,
            yerr=[
                median - np.array([s["low"] for s in spreads]),
                np.array([s["high"] for s in spreads]) - median,
            ],
            color=colors[variant],
            marker="o",
            markersize=3,
            capsize=2,
            label=variant,
        )
    _plot_scaled_rope(ax, pretrain, colors)
    ax.axvline(seq_length, color="k", linestyle=":", linewidth=1)
    ax.set_xscale("log", base=2)
    ticks = sorted(
        {int(n) for r in pretrain for n in r["heldout_loss_by_length"]}
    )
    ax.set_xticks(
        ticks or [seq_length], [str(n) for n in ticks or [seq_length]]
    )
    ax.minorticks_off()
    ax.set_xlabel(f"evaluation length (trained at {seq_length})")
    ax.set_ylabel("held-out MLM loss (nats)")
    ax.set_title("Length extrapolation: the same held-out text, longer cuts")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    return fig


def plot_glue(glue, path):
    """`draw_glue` saved as a PNG at `path`; returns `path`."""
    return save_figure(draw_glue(glue), path, metadata=_METADATA)


def draw_glue(glue):
    """GLUE scores per variant on the study's evaluation files (median,
    min-max error bars); the no-pre-training control as a line with its
    min-max band. Returns the figure."""
    tasks = list(glue)
    fig, axes = pyplot().subplots(
        1, len(tasks), figsize=(5.5 * len(tasks), 4.5), squeeze=False
    )
    for ax, task in zip(axes[0], tasks):
        rows = glue[task]
        control = rows.get("no-pretraining")
        names = [v for v in rows if v != "no-pretraining"]
        medians = np.array([rows[v]["score"]["median"] for v in names])
        low = np.array([rows[v]["score"]["low"] for v in names])
        high = np.array([rows[v]["score"]["high"] for v in names])
        # Points, not bars: a bar must start at zero, which flattens
        # differences of 0.01 in accuracy near 0.8.
        ax.errorbar(
            range(len(names)),
            medians,
            yerr=[medians - low, high - medians],
            fmt="o",
            capsize=4,
            color="tab:blue",
        )
        if control:
            score = control["score"]
            ax.axhline(
                score["median"],
                color="tab:red",
                linewidth=1.5,
                label="no pre-training (median)",
            )
            ax.axhspan(score["low"], score["high"], color="tab:red", alpha=0.12)
            ax.legend(fontsize=8, loc="lower right")
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(names, rotation=45, ha="right", fontsize=8)
        metric = next(iter(rows.values()))["metric"]
        ax.set_ylabel(f"{metric} on the {evaluation_name(task)}")
        ax.set_xlim(-0.5, max(len(names), 1) - 0.5)
        ax.set_title(
            f"{task_name(task)}: median over fine-tuning seeds, bars min-max"
        )
        ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    return fig
