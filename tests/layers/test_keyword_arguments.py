import pytest

from tupe_tf.layers.keyword_arguments import refuse_unknown_keywords


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


def test_position_layers_refuse_misspellings_and_keep_round_trips():
    from tupe_tf.layers import AlibiPositionBias
    from tupe_tf.layers import DietRelativePositionBias

    with pytest.raises(TypeError, match="did you mean `sharing`"):
        DietRelativePositionBias(
            num_layers=2, num_heads=2, max_sequence_length=8, sharng="none"
        )
    layer = AlibiPositionBias(
        num_heads=2, max_sequence_length=8, name="a", trainable=False
    )
    clone = AlibiPositionBias.from_config(layer.get_config())
    assert clone.name == "a" and clone.trainable is False
