"""Pictures of positional attention (TUPE fig. 6; DIET figs. 2, 4, 7, 8)."""

import numpy as np

from tupe_tf.analysis.plotting import pyplot
from tupe_tf.analysis.plotting import save_figure


def plot_positional_bias(
    backbone, sequence_length, path, max_layers=4, name=None
):
    """Writes `positional_bias_figure` to a PNG file.

    Args:
        backbone: a `tupe_tf.TupeBackbone`.
        sequence_length: int. `n` of the `n x n` maps.
        path: output PNG path.
        max_layers: int. Layers drawn when the bias differs per layer.
        name: the model's name in the title (default: its position
            encoding; an ablation such as `tupe-a-tie-cls` passes its own).

    Returns:
        `path`.
    """
    fig = positional_bias_figure(backbone, sequence_length, max_layers, name)
    save_figure(fig, path)
    return path


def positional_bias_figure(backbone, sequence_length, max_layers=4, name=None):
    """Heat maps of `backbone.positional_bias` per head (and layer).

    One axes per drawn (layer, head), in row-major order; each shows
    `positional_bias(n)[layer, head]`. Only layer 0 is drawn when all
    layers share the bias. The title names the model (`name`, default its
    position encoding).

    Returns:
        The matplotlib figure (the caller saves or closes it).
    """
    bias = backbone.positional_bias(sequence_length)  # (L, H, n, n)
    shared = all(np.allclose(bias[0], b) for b in bias[1:])
    layers = 1 if shared else min(max_layers, bias.shape[0])
    heads = bias.shape[1]
    fig, axes = pyplot().subplots(
        layers,
        heads,
        figsize=(max(6.0, 2.2 * heads), 2.2 * layers + 0.9),
        squeeze=False,
    )
    for layer in range(layers):
        for head in range(heads):
            ax = axes[layer, head]
            ax.imshow(bias[layer, head], cmap="viridis")
            ax.set_xticks([])
            ax.set_yticks([])
            title = f"head {head}" if shared else f"layer {layer} head {head}"
            ax.set_title(title, fontsize=8)
    scope = "shared by all layers" if shared else "per layer"
    fig.suptitle(
        f"{name or backbone.position_encoding}: content-free position bias\n"
        f"(query i rows, key j columns; {scope})",
        fontsize=10,
    )
    fig.tight_layout()
    return fig


def numerical_ranks(matrices, relative_tolerance=1e-4):
    """Numerical rank of each `n x n` matrix in `(..., n, n)` (float64 SVD)."""
    matrices = np.asarray(matrices, dtype="float64")
    flat = matrices.reshape((-1,) + matrices.shape[-2:])
    ranks = []
    for matrix in flat:
        singular = np.linalg.svd(matrix, compute_uv=False)
        ranks.append(int((singular > relative_tolerance * singular[0]).sum()))
    return np.array(ranks).reshape(matrices.shape[:-2])


def attention_ranks(backbone, inputs):
    """Mean numerical rank per layer of the attention logits.

    Returns a dict with `content` (`c (xW^Q)(xW^K)^T`, positions at the input
    included, rank <= head size) and `with_bias` (plus the per-head
    content-free bias), each an array `(num_layers,)` averaged over batch and
    heads, and `head_dim`.
    """
    content = backbone.attention_logits(inputs, include_bias=False)
    with_bias = backbone.attention_logits(inputs, include_bias=True)
    return {
        "content": np.array([numerical_ranks(m).mean() for m in content]),
        "with_bias": np.array([numerical_ranks(m).mean() for m in with_bias]),
        "head_dim": backbone.hidden_dim // backbone.num_heads,
        "sequence_length": int(np.shape(inputs["token_ids"])[1]),
    }


def plot_attention_ranks(ranks_by_model, path):
    """Writes `attention_ranks_figure` to a PNG file; returns `path`.

    Args:
        ranks_by_model: dict name -> `attention_ranks(...)` output.
        path: output PNG path.
    """
    save_figure(attention_ranks_figure(ranks_by_model), path)
    return path


def attention_ranks_figure(ranks_by_model):
    """Bars of attention-logit rank per layer for one or more models.

    For each model, in order, two bar containers: its `content` ranks, then
    its `with_bias` ranks (one bar per layer).

    Returns:
        The matplotlib figure (the caller saves or closes it).
    """
    fig, ax = pyplot().subplots(figsize=(7, 4))
    names = list(ranks_by_model)
    num_layers = len(next(iter(ranks_by_model.values()))["content"])
    width = 0.8 / (2 * len(names))
    positions = np.arange(num_layers)
    for index, name in enumerate(names):
        ranks = ranks_by_model[name]
        offset = (2 * index) * width
        ax.bar(
            positions + offset,
            ranks["content"],
            width,
            label=f"{name}: content logits only",
        )
        ax.bar(
            positions + offset + width,
            ranks["with_bias"],
            width,
            label=f"{name}: with its position bias",
        )
    first = next(iter(ranks_by_model.values()))
    ax.axhline(
        first["head_dim"],
        color="k",
        linestyle="--",
        linewidth=1,
        label=f"head size d = {first['head_dim']}",
    )
    ax.set_xlabel("layer")
    ax.set_ylabel(
        f"numerical rank of the {first['sequence_length']}x"
        f"{first['sequence_length']} attention logits"
    )
    ax.set_xticks(positions + 0.4 - width / 2)
    ax.set_xticklabels([str(i) for i in range(num_layers)])
    ax.legend(fontsize=7)
    ax.set_title("Attention rank: positions at the input vs per head")
    fig.tight_layout()
    return fig
