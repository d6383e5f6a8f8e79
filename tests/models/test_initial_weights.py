"""How the backbone starts: every positional weight from values of its own,
and the weights common to the options (encoder layers, pooler) equal across
options at one `keras.utils.set_random_seed`, so the study's runs at a seed
are paired."""

import itertools

import keras
import numpy as np
import pytest

from tests.models.backbone_cases import ALL_CONFIGS
from tests.models.backbone_cases import config_id
from tests.models.backbone_cases import make_backbone
from tests.models.backbone_cases import shaw_tables
from tests.test_case import to_numpy
from tupe_tf.layers.initializers import with_seed_offset
from tupe_tf.utils.backbone_options import POSITION_ENCODING_TABLE


def random_positional_weights(backbone):
    """The positional weights with random initial values (not the
    LayerNorm's ones and zeros, nor zero biases), by path."""
    layers = [backbone.position_bias, backbone.segment_bias]
    variables = [
        v for layer in layers if layer is not None for v in layer.weights
    ]
    variables += shaw_tables(backbone)
    values = {v.path: to_numpy(v).ravel() for v in variables}
    return {
        path: value
        for path, value in values.items()
        if value.size > 1 and np.unique(value).size > 1
    }


@pytest.mark.parametrize("options", ALL_CONFIGS, ids=config_id)
def test_positional_weights_start_independent(options):
    """No two start equal, nor share leading values (a Keras initializer
    used twice gives the same numbers: DIET-ABS's P_Q and P_K, TUPE's U^Q
    and U^K, each layer's Shaw table started equal)."""
    weights = random_positional_weights(make_backbone(**options))
    for (path_a, a), (path_b, b) in itertools.combinations(weights.items(), 2):
        size = min(a.size, b.size)
        assert not np.allclose(a[:size], b[:size]), (path_a, path_b)


@pytest.mark.parametrize(
    "option",
    [
        option
        for option, entry in POSITION_ENCODING_TABLE.items()
        if not entry.input_positions or entry.input_table == "sinusoidal"
    ],
)
def test_options_share_the_common_initial_weights_at_a_seed(option):
    """Building an option's positional layer draws no seed from Keras'
    global random state: the encoder layers and the pooler start as
    `nope`'s at the same seed."""

    def common_weights(position_encoding):
        keras.utils.set_random_seed(3)
        backbone = make_backbone(position_encoding=position_encoding)
        layers = backbone.transformer_layers + [backbone.pooled_dense]
        return [
            to_numpy(v)
            for layer in layers
            for v in layer.weights
            if "shaw_relative_logits" not in v.path  # Shaw's own tables
        ]

    for ours, nope in zip(common_weights(option), common_weights("nope")):
        np.testing.assert_array_equal(ours, nope)


def test_seed_offset_gives_other_values_and_keeps_the_rest():
    base = keras.initializers.TruncatedNormal(stddev=0.02, seed=11)
    assert with_seed_offset(base, 0) is base
    shifted = with_seed_offset(base, 1)
    assert (shifted.seed, shifted.stddev) == (12, 0.02)
    assert not np.allclose(to_numpy(base((64,))), to_numpy(shifted((64,))))
    zeros = keras.initializers.Zeros()
    assert with_seed_offset(zeros, 2) is zeros
