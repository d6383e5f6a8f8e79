"""Refusing misspelt keyword arguments, with the closest valid name.

`refuse_unknown_keywords` checks the `**kwargs` of a constructor (layers,
the backbone); `refuses_unknown_keywords` gives a keras-hub family class
that only forwards its arguments a constructor that checks them first;
`refuses_unknown_fields` does the same for a configuration dataclass. Both raise the one `TypeError` of
`unknown_keywords_error`. No TensorFlow import: the data pipeline's
configurations use it too.

Example:

>>> class Layer(keras.layers.Layer):  # doctest: +SKIP
...     def __init__(self, units, **kwargs):
...         refuse_unknown_keywords(Layer, kwargs)
...         super().__init__(**kwargs)
"""

import dataclasses
import difflib
import functools
import inspect

# What Keras and keras-hub themselves pass when deserializing a layer or a
# backbone (`get_config` keys of `keras.layers.Layer` and `Backbone`).
KERAS_KEYWORDS = ("name", "trainable", "dtype")
# keras-hub's tokenizers and preprocessors also take (and save) the name of
# their preset config file; their `__init__(*args, **kwargs)` pops it.
PRESET_KEYWORDS = KERAS_KEYWORDS + ("config_file",)


def _named_parameters(cls):
    signature = inspect.signature(cls.__init__)
    return [
        name
        for name, parameter in signature.parameters.items()
        if name != "self"
        and parameter.kind
        not in (parameter.VAR_KEYWORD, parameter.VAR_POSITIONAL)
    ]


def unknown_keywords_error(owner, unknown, valid, nested=None):
    """The `TypeError` naming each unknown keyword and the closest valid one.

    Args:
        owner: str. The class (or function) that got the keywords.
        unknown: the unknown names.
        valid: the valid names, in the order they are listed.
        nested: optional dict `{field: (class, its valid names)}`: an unknown
            name valid in a nested configuration is pointed there.

    Returns:
        A `TypeError` (to raise).
    """
    hints = []
    for name in sorted(unknown):
        hint = f"`{name}`"
        homes = [
            f"{field}={cls.__name__}({name}=...)"
            for field, (cls, names) in (nested or {}).items()
            if name in names
        ]
        close = difflib.get_close_matches(name, valid, n=1, cutoff=0.6)
        if homes:
            hint += f" (it belongs in `{homes[0]}`)"
        elif close:
            hint += f" (did you mean `{close[0]}`?)"
        hints.append(hint)
    return TypeError(
        f"{owner} got unknown keyword argument(s) {', '.join(hints)}. "
        f"Valid arguments: {', '.join(valid)}."
    )


def refuse_unknown_keywords(
    cls, kwargs, extra_valid=KERAS_KEYWORDS, parents=()
):
    """Raises `TypeError` if `kwargs` has a name `cls` does not take.

    Args:
        cls: the class whose `__init__` received `**kwargs`.
        kwargs: dict of the keyword arguments left over.
        extra_valid: names accepted beyond `cls.__init__`'s own arguments
            (those Keras passes through `**kwargs`).
        parents: classes whose `__init__` arguments `cls` forwards through
            `**kwargs` (e.g. the keras-hub class it extends); their named
            arguments are valid too.

    Raises:
        TypeError naming the unknown argument and the closest valid one.
    """
    valid = []
    for owner in (cls, *parents):
        valid += [n for n in _named_parameters(owner) if n not in valid]
    valid += [name for name in extra_valid if name not in valid]
    unknown = [name for name in kwargs if name not in valid]
    if unknown:
        raise unknown_keywords_error(cls.__name__, unknown, valid)


def refuses_unknown_keywords(*parents, extra_valid=KERAS_KEYWORDS):
    """Class decorator: `__init__(*args, **kwargs)` checks `kwargs` first.

    For a subclass that adds no constructor argument of its own: keras
    would refuse a misspelt keyword without the closest name (a
    `keras.Model` would even drop it silently).

    Args:
        *parents: the classes whose named `__init__` arguments are valid
            (the class extended first; `super().__init__` gets the call).
        extra_valid: names accepted beyond those (see
            `refuse_unknown_keywords`).

    Returns:
        The decorator; it sets `cls.__init__` and returns `cls`.

    Example:

    >>> @refuses_unknown_keywords(BertTokenizer)  # doctest: +SKIP
    ... class Tokenizer(BertTokenizer):
    ...     pass
    """

    def decorate(cls):
        def __init__(self, *args, **kwargs):
            refuse_unknown_keywords(
                cls, kwargs, extra_valid=extra_valid, parents=parents
            )
            super(cls, self).__init__(*args, **kwargs)

        cls.__init__ = __init__
        return cls

    return decorate


def refuses_unknown_fields(cls):
    """Class decorator: a dataclass whose constructor names bad keywords.

    Python's own error ("got an unexpected keyword argument") neither
    suggests the intended field nor says that a flat flag name such as
    `learning_rate` belongs to a nested configuration; this one does both.
    Apply it on top of `@dataclasses.dataclass`.

    Args:
        cls: a dataclass.

    Returns:
        `cls`, whose `__init__` raises `unknown_keywords_error` first.

    Example:

    >>> @refuses_unknown_fields
    ... @dataclasses.dataclass
    ... class Config:
    ...     num_steps: int = 1
    >>> Config(num_step=2)
    Traceback (most recent call last):
    TypeError: Config got unknown keyword argument(s) `num_step` (did you mean `num_steps`?). Valid arguments: num_steps.
    """
    fields = [f for f in dataclasses.fields(cls) if f.init]
    valid = [f.name for f in fields]
    nested = {
        f.name: (f.type, [g.name for g in dataclasses.fields(f.type)])
        for f in fields
        if isinstance(f.type, type) and dataclasses.is_dataclass(f.type)
    }
    init = cls.__init__

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        unknown = [name for name in kwargs if name not in valid]
        if unknown:
            raise unknown_keywords_error(cls.__name__, unknown, valid, nested)
        init(self, *args, **kwargs)

    cls.__init__ = __init__
    return cls
