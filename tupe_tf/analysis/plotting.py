"""matplotlib for the figures: loaded on first use, saved atomically.

matplotlib is the `figures` extra (`pip install 'tupe-tf[figures]'`): the
model, the data pipeline and the main job do not need it, and a figure
drawn without it is refused with one `UserError` naming the extra.

Example:
>>> fig, ax = pyplot().subplots()  # doctest: +SKIP
>>> save_figure(fig, "figures/loss.png")  # doctest: +SKIP
"""

import os

from tupe_tf.utils import extras
from tupe_tf.utils import fileio

# The resolution every figure is written at (dots per inch).
DPI = 110


def pyplot():
    """`matplotlib.pyplot` on the file-only Agg backend (no display)."""
    matplotlib = extras.import_extra("matplotlib", "figures", "Drawing figures")
    matplotlib.use("Agg")
    return extras.import_extra(
        "matplotlib.pyplot", "figures", "Drawing figures"
    )


def save_figure(fig, path, metadata=None):
    """Writes `fig` as a PNG at `path` (all or nothing) and closes it.

    Args:
        fig: a matplotlib figure.
        path: the PNG's path; missing directories are created.
        metadata: PNG metadata for `savefig` (`{"Software": None}` leaves
            out matplotlib's version, so that the same data give the same
            bytes); `None`: matplotlib's default.

    Returns:
        `path`.
    """
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with fileio.atomic_file(path) as temporary:
        fig.savefig(temporary, dpi=DPI, format="png", metadata=metadata)
    pyplot().close(fig)
    return path
