"""Refusing misspelt keyword arguments, with the closest valid name."""

import difflib
import inspect

# What Keras and keras-hub themselves pass when deserializing a layer or a
# backbone (`get_config` keys of `keras.layers.Layer` and `Backbone`).
KERAS_KEYWORDS = ("name", "trainable", "dtype")


def refuse_unknown_keywords(cls, kwargs, extra_valid=KERAS_KEYWORDS):
    """Raises `TypeError` if `kwargs` has a name `cls` does not take.

    Args:
        cls: the class whose `__init__` received `**kwargs`.
        kwargs: dict of the keyword arguments left over.
        extra_valid: names accepted beyond `cls.__init__`'s own arguments
            (those Keras passes through `**kwargs`).

    Raises:
        TypeError naming the unknown argument and the closest valid one.
    """
    signature = inspect.signature(cls.__init__)
    valid = [
        name
        for name, parameter in signature.parameters.items()
        if name != "self" and parameter.kind != parameter.VAR_KEYWORD
    ]
    valid += [name for name in extra_valid if name not in valid]
    unknown = sorted(name for name in kwargs if name not in valid)
    if not unknown:
        return
    hints = []
    for name in unknown:
        close = difflib.get_close_matches(name, valid, n=1, cutoff=0.6)
        hint = f"`{name}`"
        if close:
            hint += f" (did you mean `{close[0]}`?)"
        hints.append(hint)
    raise TypeError(
        f"{cls.__name__} got unknown keyword argument(s) "
        f"{', '.join(hints)}. Valid arguments: {', '.join(valid)}."
    )
