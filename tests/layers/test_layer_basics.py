"""keras-hub's layer checks (`TestCase.run_position_bias_test`) for each
positional layer and the segment bias, one case per layer and setting."""

import numpy as np
from absl.testing import parameterized

from tests.test_case import TestCase
from tupe_tf.layers import AlibiPositionBias
from tupe_tf.layers import DietAbsolutePositionBias
from tupe_tf.layers import DietRelativePositionBias
from tupe_tf.layers import FirePositionBias
from tupe_tf.layers import KerplePositionBias
from tupe_tf.layers import RotaryPositionTables
from tupe_tf.layers import SegmentAttentionBias
from tupe_tf.layers import UntiedPositionBias
from tupe_tf.layers import UntiedPositionOffsets

SEGMENT_IDS = np.array([[0, 0, 1, 2], [0, 1, 1, 1]], "int32")
UNTIED = dict(num_heads=4, hidden_dim=32, max_sequence_length=8)
YARN = dict(scaling="yarn", scaling_factor=4.0, trained_length=16)
# name: the layer and its arguments.
LAYERS = {
    "alibi": (AlibiPositionBias, dict(num_heads=6, max_sequence_length=16)),
    "fire": (FirePositionBias, dict(num_heads=3, max_sequence_length=16)),
    "kerple": (KerplePositionBias, dict(num_heads=3, max_sequence_length=16)),
    "diet_abs": (
        DietAbsolutePositionBias,
        dict(num_layers=2, num_heads=2, max_sequence_length=8, rank=4),
    ),
    "diet_rel": (
        DietRelativePositionBias,
        dict(num_layers=2, num_heads=2, max_sequence_length=8),
    ),
    "rotary": (
        RotaryPositionTables,
        dict(head_dim=8, max_sequence_length=16, max_wavelength=500),
    ),
    "rotary_yarn": (
        RotaryPositionTables,
        dict(head_dim=8, max_sequence_length=64, **YARN),
    ),
    "untied_bias": (UntiedPositionBias, dict(UNTIED, relative_buckets=8)),
    "untied_offsets": (UntiedPositionOffsets, dict(UNTIED, scale=0.5)),
    "segments": (
        SegmentAttentionBias,
        dict(num_layers=2, num_heads=2, num_segments=3),
    ),
}
# name: the input (a shape of zero token ids, or the ids), the output shape
# and the number of trainable weights.
EXPECTED = {
    "alibi": ((3, 9), (1, 1, 6, 9, 9), 0),
    "fire": ((2, 9), (1, 1, 3, 9, 9), 6),
    "kerple": ((2, 9), (1, 1, 3, 9, 9), 2),
    "diet_abs": ((2, 6), (1, 1, 2, 6, 6), 2),
    "diet_rel": ((2, 8), (2, 1, 2, 8, 8), 1),
    "rotary": ((2, 11), (2, 11, 1, 8), 0),
    "rotary_yarn": ((2, 40), (2, 40, 1, 8), 0),
    "untied_bias": ((2, 6), (1, 1, 4, 6, 6), 8),
    "untied_offsets": ((1, 5), (2, 5, 4, 8), 7),
    "segments": (SEGMENT_IDS, (1, 2, 2, 4, 4), 1),
}


class LayerBasicsTest(TestCase):
    @parameterized.named_parameters((name, name) for name in LAYERS)
    def test_layer_basics(self, name):
        cls, init_kwargs = LAYERS[name]
        inputs, output_shape, weights = EXPECTED[name]
        if isinstance(inputs, tuple):
            inputs = np.zeros(inputs, "int32")
        self.run_position_bias_test(
            cls, init_kwargs, inputs, output_shape, weights
        )
