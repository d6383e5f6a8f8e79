"""absl flags generated from configuration dataclasses, and back.

A configuration dataclass declares each setting once, with
`tupe_tf.utils.settings.setting` (default, help, range, choices, flag
name); `define_flags` turns every field into an absl flag and
`config_from_flags` builds the dataclass back from the parsed flags.

Types: `bool`, `int`, `float`, `str` (an enum when the field has choices),
`Optional[...]` of them (default `None`), lists/tuples/sequences of them
(`DEFINE_list` whose elements are parsed to the element type), and nested
dataclasses, whose fields become flags of their own (flat names: nested
names must not collide).

This module imports absl but neither TensorFlow nor Keras.

Example:

>>> from tupe_tf.utils.settings import setting
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

import dataclasses
import typing

from absl import flags

from tupe_tf.utils.settings import Range
from tupe_tf.utils.settings import field_default
from tupe_tf.utils.settings import list_element_type
from tupe_tf.utils.settings import unwrap_optional

_TYPES = (bool, int, float, str)


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


def flag_specs(config_cls, _path=()):
    """The `FlagSpec` of every flag `config_cls` defines, nested included.

    Raises:
        TypeError: a field without help, of an unsupported type, or two
            fields with the same flag name.
    """
    hints = typing.get_type_hints(config_cls)
    specs = []
    for field in dataclasses.fields(config_cls):
        annotation = unwrap_optional(hints[field.name])
        if dataclasses.is_dataclass(annotation):
            specs.extend(flag_specs(annotation, _path + (field.name,)))
            continue
        meta = field.metadata
        if meta.get("flag") is False:
            continue
        if "help" not in meta:
            raise TypeError(
                f"{config_cls.__name__}.{field.name} has no help: declare it "
                "with tupe_tf.utils.settings.setting(default, help=...)."
            )
        annotation = meta.get("value_type") or annotation
        default = field_default(field)
        element_type = None
        if meta.get("choices"):
            kind = "enum"
        elif annotation in _TYPES:
            kind = annotation.__name__
        else:
            element_type = meta.get("element_type") or list_element_type(
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
    their defaults); `overrides` replace top-level fields. The library
    entry point the script passes it to checks it (`Settings.validate`)."""
    return _build(config_cls, flag_values, (), overrides)


def _build(config_cls, flag_values, path, overrides):
    specs = {spec.path: spec for spec in flag_specs(config_cls)}
    hints = typing.get_type_hints(config_cls)
    kwargs = {}
    for field in dataclasses.fields(config_cls):
        if not path and field.name in overrides:
            kwargs[field.name] = overrides[field.name]
            continue
        annotation = unwrap_optional(hints[field.name])
        if dataclasses.is_dataclass(annotation):
            kwargs[field.name] = _build(
                annotation, flag_values, path + (field.name,), {}
            )
            continue
        spec = specs.get((field.name,))
        if spec is not None:
            kwargs[field.name] = flag_values[spec.name].value
    return config_cls(**kwargs)
