import pytest

from tupe_tf.layers.sharing import sharing_units
from tupe_tf.utils.backbone_options import POSITION_SHARINGS


def test_units_per_mode():
    assert sharing_units("layer-wise", 12, 8) == (1, 8)
    assert sharing_units("head-wise", 12, 8) == (12, 1)
    assert sharing_units("none", 12, 8) == (12, 8)
    assert set(POSITION_SHARINGS) == {"layer-wise", "head-wise", "none"}


def test_unknown_mode_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="position_sharing.*head-wise"):
        sharing_units("per-layer", 2, 2)
