import dataclasses

import pytest

from tests.test_case import TestCase
from tupe_tf.utils.keyword_arguments import refuse_unknown_keywords
from tupe_tf.utils.keyword_arguments import refuses_unknown_fields


class Example:
    def __init__(self, num_heads, position_rank=None, **kwargs):
        refuse_unknown_keywords(Example, kwargs)


def test_known_and_keras_keywords_pass():
    Example(num_heads=2, position_rank=3, name="x", trainable=True, dtype=None)


def test_misspelling_is_named_with_the_closest_valid_name():
    with pytest.raises(TypeError) as error:
        Example(num_heads=2, positon_rank=3, zzz=1)
    message = str(error.value)
    assert "Example got unknown keyword argument(s)" in message
    assert "`positon_rank` (did you mean `position_rank`?)" in message
    assert "`zzz`" in message and "`zzz` (did" not in message


class LayerKeywordArgumentsTest(TestCase):
    def test_position_layers_refuse_misspellings_and_keep_round_trips(self):
        from tupe_tf.layers import AlibiPositionBias
        from tupe_tf.layers import DietRelativePositionBias

        with pytest.raises(TypeError, match="did you mean `sharing`"):
            DietRelativePositionBias(
                num_layers=2, num_heads=2, max_sequence_length=8, sharng="none"
            )
        layer = AlibiPositionBias(
            num_heads=2, max_sequence_length=8, name="a", trainable=False
        )
        self.run_serialization_test(layer)
        clone = AlibiPositionBias.from_config(layer.get_config())
        assert clone.name == "a" and clone.trainable is False

    def test_biased_layers_refuse_misspellings_and_keep_round_trips(self):
        from tupe_tf.layers import BiasedMultiHeadAttention
        from tupe_tf.layers import BiasedTransformerEncoder
        from tupe_tf.layers import SegmentAttentionBias

        with pytest.raises(TypeError, match="did you mean `content_scale`"):
            BiasedMultiHeadAttention(num_heads=2, key_dim=4, content_scal=0.5)
        with pytest.raises(TypeError, match="did you mean `dropout`"):
            BiasedTransformerEncoder(
                intermediate_dim=8, num_heads=2, dropot=0.1
            )
        with pytest.raises(TypeError, match="did you mean `sharing`"):
            SegmentAttentionBias(
                num_layers=1, num_heads=2, num_segments=2, sharng="none"
            )
        layers = [
            BiasedMultiHeadAttention(
                num_heads=2, key_dim=4, content_scale=0.5, dropout=0.1, name="m"
            ),
            BiasedTransformerEncoder(
                intermediate_dim=8,
                num_heads=2,
                content_scale=0.25,
                layer_norm_epsilon=1e-12,
                trainable=False,
            ),
            SegmentAttentionBias(num_layers=2, num_heads=2, num_segments=3),
        ]
        for layer in layers:
            self.run_serialization_test(layer)


def test_dataclass_refuses_unknown_fields_and_points_to_nested_ones():
    @dataclasses.dataclass
    class Inner:
        learning_rate: float = 1.0

    @refuses_unknown_fields
    @dataclasses.dataclass
    class Outer:
        num_steps: int = 1
        inner: Inner = dataclasses.field(default_factory=Inner)

    assert Outer(2, inner=Inner(3.0)) == Outer(num_steps=2, inner=Inner(3.0))
    with pytest.raises(TypeError) as error:
        Outer(num_step=2, learning_rate=0.1)
    message = str(error.value)
    assert message.startswith("Outer got unknown keyword argument(s)")
    assert "`num_step` (did you mean `num_steps`?)" in message
    assert (
        "`learning_rate` (it belongs in `inner=Inner(learning_rate=...)`)"
        in (message)
    )
    # Positional arguments and dataclasses.replace still work.
    assert dataclasses.replace(Outer(5), num_steps=6).num_steps == 6
