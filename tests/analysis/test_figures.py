import matplotlib.image
import numpy as np

import tupe_tf
from tupe_tf.analysis import figures


def test_numerical_ranks_of_known_matrices():
    rng = np.random.default_rng(0)
    low = rng.normal(size=(2, 12, 3)) @ rng.normal(size=(2, 3, 12))
    full = rng.normal(size=(12, 12))
    assert list(figures.numerical_ranks(low)) == [3, 3]
    assert figures.numerical_ranks(full[None])[0] == 12


def test_positional_bias_png(tmp_path):
    backbone = tupe_tf.TupeBackbone(
        vocabulary_size=50,
        num_layers=2,
        num_heads=2,
        hidden_dim=16,
        intermediate_dim=32,
        max_sequence_length=16,
        position_encoding="diet-rel",
    )
    path = figures.plot_positional_bias(backbone, 8, str(tmp_path / "b.png"))
    image = matplotlib.image.imread(path)
    assert image.ndim == 3 and image.shape[0] > 100
