"""A PNG written by the package shows exactly a figure's drawing."""

import io

import matplotlib.image
import numpy as np


def assert_png_shows(png, figure):
    """The PNG (a path, or its bytes) has the pixels `figure` renders at the
    package's resolution (closes `figure`)."""
    from tupe_tf.analysis.plotting import DPI
    from tupe_tf.analysis.plotting import pyplot

    try:
        figure.set_dpi(DPI)
        figure.canvas.draw()
        drawn = np.asarray(figure.canvas.buffer_rgba())
    finally:
        pyplot().close(figure)
    if isinstance(png, bytes):
        png = io.BytesIO(png)
    written = matplotlib.image.imread(png, format="png")
    np.testing.assert_array_equal(
        (written * 255).round().astype(np.uint8), drawn
    )
