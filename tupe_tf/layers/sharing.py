"""Parameter sharing of DIET's per-head tables across layers and heads."""

from tupe_tf.utils.backbone_options import POSITION_SHARINGS


def sharing_units(sharing, num_layers, num_heads):
    """Returns `(table_units, table_heads)` for a sharing mode.

    `layer-wise`: one table per head, shared by all layers -> `(1, H)`.
    `head-wise`: one table per layer, shared by its heads -> `(L, 1)`.
    `none`: one table per layer and head -> `(L, H)`.
    """
    if sharing not in POSITION_SHARINGS:
        raise ValueError(
            f"`position_sharing` must be one of {POSITION_SHARINGS}. "
            f"Received: position_sharing={sharing!r}"
        )
    units = 1 if sharing == "layer-wise" else num_layers
    heads = 1 if sharing == "head-wise" else num_heads
    return units, heads
