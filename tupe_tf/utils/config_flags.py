"""absl flags generated from configuration dataclasses, and back.

A configuration dataclass is the one place a setting, its default and its
help text are written: `setting(default, help=...)` stores the help (and
the choices, the flag name, whether the flag is required) as field
metadata; `define_flags` turns every field into an absl flag and
`config_from_flags` builds the dataclass back from the parsed flags.

A numeric setting declares its valid values where it is declared
(`valid=at_least(1)`, `greater_than(0)`, `between(0, 1, high_open=True)`):
the flag's help shows them, and `config_from_flags` refuses a value outside
them (`UserError` naming the flag, the value and the range) before the
script builds or writes anything.

Types: `bool`, `int`, `float`, `str` (an enum when the field has choices),
`Optional[...]` of them (default `None`), lists/tuples/sequences of them
(`DEFINE_list` whose elements are parsed to the element type), and nested
dataclasses, whose fields become flags of their own (flat names: nested
names must not collide).

This module imports absl but neither TensorFlow nor Keras.

Example:

>>> @dataclasses.dataclass
... class Config:
...     steps: int = setting(100, help="Training steps.")
...     rates: tuple = setting((0.1, 0.2), help="Rates.", element_type=float)
>>> values = flags.FlagValues()
>>> define_flags(Config, values)
>>> _ = values(["prog", "--steps=7", "--rates=0.5"])
>>> config_from_flags(Config, values)
Config(steps=7, rates=[0.5])
"""

import collections.abc
import dataclasses
import typing

from absl import app
from absl import flags

from tupe_tf.utils.errors import UserError

_TYPES = (bool, int, float, str)
_SEQUENCE_ORIGINS = (list, tuple, collections.abc.Sequence)


@dataclasses.dataclass(frozen=True)
class Range:
    """The valid values of a numeric setting: an interval, open or closed
    at either end, unbounded where an end is `None`.

    Args:
        low: the lower end, or `None`.
        high: the upper end, or `None`.
        low_open: `low` itself is outside the range.
        high_open: `high` itself is outside the range.
    """

    low: typing.Optional[float] = None
    high: typing.Optional[float] = None
    low_open: bool = False
    high_open: bool = False

    def __contains__(self, value):
        if self.low is not None and (
            value < self.low or (self.low_open and value == self.low)
        ):
            return False
        return self.high is None or (
            value < self.high or (not self.high_open and value == self.high)
        )

    def __str__(self):
        if self.high is None:
            return f"{'>' if self.low_open else '>='} {_number(self.low)}"
        if self.low is None:
            return f"{'<' if self.high_open else '<='} {_number(self.high)}"
        return (
            f"in {'(' if self.low_open else '['}{_number(self.low)}, "
            f"{_number(self.high)}{')' if self.high_open else ']'}"
        )


def _number(value):
    return f"{value:g}" if isinstance(value, float) else str(value)


def at_least(low):
    """The range `>= low`."""
    return Range(low=low)


def greater_than(low):
    """The range `> low`."""
    return Range(low=low, low_open=True)


def between(low, high, low_open=False, high_open=False):
    """The range from `low` to `high` (closed unless said open)."""
    return Range(low, high, low_open, high_open)


def setting(
    default=dataclasses.MISSING,
    *,
    help,
    valid=None,
    choices=None,
    flag=None,
    required=False,
    element_type=None,
    value_type=None,
    default_factory=dataclasses.MISSING,
):
    """A dataclass field with its flag metadata.

    Args:
        default: the default value (lists and tuples are fine: they are
            copied into a `default_factory`).
        help: the flag's help text; the one description of the setting.
        valid: the `Range` of valid values of a numeric setting (of each
            element of a list setting); the flag's help shows it.
        choices: the allowed values (an enum flag).
        flag: the flag name when it differs from the field name; `False`
            for a library-only field that gets no flag.
        required: the flag must be given (its flag default is `None`).
        element_type: the element type of a list field when the annotation
            does not say it (e.g. `Sequence[str]` without a parameter).
        value_type: the flag type when the annotation does not say it.
        default_factory: as in `dataclasses.field`.
    """
    metadata = {
        "help": help,
        "valid": valid,
        "choices": tuple(choices) if choices is not None else None,
        "flag": flag,
        "required": required,
        "element_type": element_type,
        "value_type": value_type,
    }
    if isinstance(default, (list, tuple)):
        value = tuple(default)
        default_factory = lambda: value  # noqa: E731
        default = dataclasses.MISSING
    return dataclasses.field(
        default=default, default_factory=default_factory, metadata=metadata
    )


@dataclasses.dataclass(frozen=True)
class FlagSpec:
    """How one dataclass field maps to one flag.

    Args:
        name: the flag name.
        path: the field names from the top config down to this field.
        kind: `"bool"`, `"int"`, `"float"`, `"str"`, `"enum"` or `"list"`.
        default: the flag default.
        help: the help text.
        choices: enum choices, else `None`.
        element_type: element type of a list flag, else `None`.
        required: the flag must be given.
        valid: the `Range` of valid values, else `None`.
    """

    name: str
    path: tuple
    kind: str
    default: typing.Any
    help: str
    choices: typing.Optional[tuple]
    element_type: typing.Optional[type]
    required: bool
    valid: typing.Optional[Range] = None


def _unwrap_optional(annotation):
    if typing.get_origin(annotation) is typing.Union:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def _list_element_type(annotation):
    """The element type of a list-like annotation, else `None`."""
    if annotation in (list, tuple):
        return str
    if typing.get_origin(annotation) not in _SEQUENCE_ORIGINS:
        return None
    args = [a for a in typing.get_args(annotation) if a is not Ellipsis]
    return args[0] if args else str


def _field_default(field):
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return None


def flag_specs(config_cls, _path=()):
    """The `FlagSpec` of every flag `config_cls` defines, nested included.

    Raises:
        TypeError: a field without help, of an unsupported type, or two
            fields with the same flag name.
    """
    hints = typing.get_type_hints(config_cls)
    specs = []
    for field in dataclasses.fields(config_cls):
        annotation = _unwrap_optional(hints[field.name])
        if dataclasses.is_dataclass(annotation):
            specs.extend(flag_specs(annotation, _path + (field.name,)))
            continue
        meta = field.metadata
        if meta.get("flag") is False:
            continue
        if "help" not in meta:
            raise TypeError(
                f"{config_cls.__name__}.{field.name} has no help: declare it "
                "with config_flags.setting(default, help=...)."
            )
        annotation = meta.get("value_type") or annotation
        default = _field_default(field)
        element_type = None
        if meta.get("choices"):
            kind = "enum"
        elif annotation in _TYPES:
            kind = annotation.__name__
        else:
            element_type = meta.get("element_type") or _list_element_type(
                annotation
            )
            if element_type not in _TYPES:
                raise TypeError(
                    f"{config_cls.__name__}.{field.name}: unsupported flag "
                    f"type {hints[field.name]!r}."
                )
            kind = "list"
            default = None if default is None else list(default)
        specs.append(
            FlagSpec(
                name=meta.get("flag") or field.name,
                path=_path + (field.name,),
                kind=kind,
                default=None if meta.get("required") else default,
                help=_help_with_range(meta["help"], meta.get("valid")),
                choices=meta.get("choices"),
                element_type=element_type,
                required=bool(meta.get("required")),
                valid=meta.get("valid"),
            )
        )
    names = [spec.name for spec in specs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise TypeError(
            f"{config_cls.__name__}: flag name(s) {duplicates} defined twice."
        )
    return specs


def _help_with_range(help_text, valid):
    return help_text if valid is None else f"{help_text} Valid: {valid}."


def check_ranges(config):
    """Refuses a numeric setting of `config` (nested configs included) that
    is not a number of its type or lies outside its declared range; a
    config's `validate` calls it too, so that library callers get the same
    refusal as the flags.

    Raises:
        UserError: `--name=value is out of range: it must be <range>.` (a
            setting without a flag is named without the dashes), or
            `--name=value is not an int` (or `a number`).
    """
    hints = typing.get_type_hints(type(config))
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if dataclasses.is_dataclass(value):
            check_ranges(value)
            continue
        valid = field.metadata.get("valid")
        if valid is None or value is None:
            continue
        flag = field.metadata.get("flag")
        name = field.name if flag is False else f"--{flag or field.name}"
        annotation = _unwrap_optional(hints[field.name])
        integral = int in (annotation, _list_element_type(annotation))
        elements = value if isinstance(value, (list, tuple)) else [value]
        for element in elements:
            _check_number(name, element, valid, integral)


def _check_number(name, value, valid, integral):
    kind = (int,) if integral else (int, float)
    if isinstance(value, bool) or not isinstance(value, kind):
        raise UserError(
            f"{name}={value!r} is not {'an int' if integral else 'a number'}: "
            f"it must be {valid}."
        )
    if value not in valid:
        raise UserError(
            f"{name}={_number(value)} is out of range: it must be {valid}."
        )


def refuse_ignored(config, names, applies, condition):
    """Refuses settings that would be accepted and then ignored.

    A setting that only matters under some other setting (`--mask_rate`
    only with `--static_masking`) is refused when it is given (differs from
    its default) while that does not hold, rather than silently unused.

    Args:
        config: a configuration dataclass instance.
        names: the field names that only apply under `condition`.
        applies: whether `condition` holds for `config`.
        condition: what they need, for the message (`"with --static_masking"`).

    Raises:
        UserError: `--name=value only applies <condition>; ...`.
    """
    if applies:
        return
    fields = {field.name: field for field in dataclasses.fields(config)}
    for name in names:
        value = getattr(config, name)
        if _comparable(value) != _comparable(_field_default(fields[name])):
            flag = fields[name].metadata.get("flag") or name
            raise UserError(
                f"--{flag}={_flag_text(value)} only applies {condition}; it "
                "would be ignored here. Leave it out, or set what it needs."
            )


def _comparable(value):
    """Lists and tuples (flags give lists, defaults tuples) compare alike."""
    return list(value) if isinstance(value, (list, tuple)) else value


def _flag_text(value):
    if isinstance(value, (list, tuple)):
        return ",".join(_flag_text(v) for v in value)
    if isinstance(value, float):
        return _number(value)
    return str(value)


class _TypedListParser(flags.ListParser):
    """Comma-separated values, each parsed to `element_type`."""

    def __init__(self, element_type):
        super().__init__()
        self._element_type = element_type

    def parse(self, argument):
        values = super().parse(argument)
        if self._element_type is bool:
            return [flags.BooleanParser().parse(v) for v in values]
        return [self._element_type(v) for v in values]

    def flag_type(self):
        return f"comma-separated list of {self._element_type.__name__}"


_DEFINERS = {
    "bool": flags.DEFINE_boolean,
    "int": flags.DEFINE_integer,
    "float": flags.DEFINE_float,
    "str": flags.DEFINE_string,
}


def define_flags(config_cls, flag_values=flags.FLAGS, skip=()):
    """Defines one absl flag per field of `config_cls` (nested included).

    Args:
        config_cls: a configuration dataclass declared with `setting`.
        flag_values: the `FlagValues` to define them on.
        skip: flag names not to define (the caller defines them).
    """
    for spec in flag_specs(config_cls):
        if spec.name in skip:
            continue
        if spec.kind == "enum":
            flags.DEFINE_enum(
                spec.name,
                spec.default,
                list(spec.choices),
                spec.help,
                flag_values=flag_values,
            )
        elif spec.kind == "list":
            flags.DEFINE(
                _TypedListParser(spec.element_type),
                spec.name,
                spec.default,
                spec.help,
                flag_values=flag_values,
                serializer=flags.CsvListSerializer(","),
            )
        else:
            _DEFINERS[spec.kind](
                spec.name, spec.default, spec.help, flag_values=flag_values
            )
        if spec.required:
            flags.mark_flag_as_required(spec.name, flag_values=flag_values)


def config_from_flags(config_cls, flag_values=flags.FLAGS, **overrides):
    """Builds `config_cls` from parsed flags (fields without a flag keep
    their defaults); `overrides` replace top-level fields.

    Raises:
        UserError: a flag's value is outside its setting's range.
    """
    config = _build(config_cls, flag_values, (), overrides)
    check_ranges(config)
    return config


def validated_config_from_flags(config_cls, flag_values=flags.FLAGS):
    """`config_from_flags`, then the config's own `validate()`.

    The config's `ValueError` (whose message starts with the field name)
    becomes an `app.UsageError` that starts with the flag (`--name`).
    """
    config = config_from_flags(config_cls, flag_values)
    try:
        config.validate()
    except ValueError as error:
        message = str(error)
        for spec in flag_specs(config_cls):
            field = spec.path[-1]
            if (
                message.startswith(field)
                and not message[len(field) : len(field) + 1].isidentifier()
            ):
                message = "--" + spec.name + message[len(field) :]
                break
        raise app.UsageError(message) from error
    return config


def _build(config_cls, flag_values, path, overrides):
    specs = {spec.path: spec for spec in flag_specs(config_cls)}
    hints = typing.get_type_hints(config_cls)
    kwargs = {}
    for field in dataclasses.fields(config_cls):
        if not path and field.name in overrides:
            kwargs[field.name] = overrides[field.name]
            continue
        annotation = _unwrap_optional(hints[field.name])
        if dataclasses.is_dataclass(annotation):
            kwargs[field.name] = _build(
                annotation, flag_values, path + (field.name,), {}
            )
            continue
        spec = specs.get((field.name,))
        if spec is not None:
            kwargs[field.name] = flag_values[spec.name].value
    return config_cls(**kwargs)
