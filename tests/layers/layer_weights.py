"""Helpers shared by the layer tests."""

import keras

# Each sharing of a table among 3 layers of 4 heads: (sharing, the table's
# units, the table's heads).
SHARINGS_OF_3_LAYERS_OF_4_HEADS = [
    ("layer-wise", 1, 4),
    ("head-wise", 3, 1),
    ("none", 3, 4),
]


def untied_weights(layer):
    """The table, LayerNorm and projections of an untied layer (float64)."""

    def np_(v):
        return keras.ops.convert_to_numpy(v).astype("float64")

    return {
        "table": np_(layer.position_embeddings),
        "ln_gamma": np_(layer.position_layer_norm.gamma),
        "ln_beta": np_(layer.position_layer_norm.beta),
        "uq": np_(layer.query_projection.kernel),
        "bq": np_(layer.query_projection.bias),
        "uk": np_(layer.key_projection.kernel),
        "bk": np_(layer.key_projection.bias),
    }
