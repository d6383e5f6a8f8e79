"""Helpers shared by the layer tests."""

import keras
import numpy as np


def randomize(layer, seed=0):
    """Random values for every weight (LayerNorm gammas around 1)."""
    rng = np.random.default_rng(seed)
    for variable in layer.weights:
        value = rng.normal(0, 0.3, variable.shape)
        if "gamma" in variable.path:
            value = 1.0 + 0.2 * rng.normal(size=variable.shape)
        variable.assign(value.astype(variable.dtype))


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
