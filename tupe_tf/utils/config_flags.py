"""absl flags generated from configuration dataclasses, and back.

A configuration dataclass declares each setting once, with
`tupe_tf.utils.settings.setting` (default, help, range, choices, flag
name); `define_flags` turns every field into an absl flag and
`config_from_flags` builds the dataclass back from the parsed flags.

Types: `bool`, `int`, `float`, `str` (an enum when the field has choices),
`Optional[...]` of them (default `None`), lists/tuples/sequences of them
(`DEFINE_list` whose elements are parsed to the element type), and nested
dataclasses, whose fields become flags of their own (flat names: nested
names must not collide; a config nested with `settings.nested` picks and
renames them).

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


def flag_specs(config_cls):
    """The `FlagSpec` of every flag `config_cls` defines, nested included.

    A nested config declared with `tupe_tf.utils.settings.nested` gives
    only the flags it picks, under the names it gives them, with the
    defaults of its default instance.

    Raises:
        TypeError: a field without help, of an unsupported type, a picked
            flag the nested config lacks, or two flags with the same name.
    """
    specs = _specs(config_cls, None, ())
    names = [spec.name for spec in specs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise TypeError(
            f"{config_cls.__name__}: flag name(s) {duplicates} defined twice."
        )
    return specs


def _specs(config_cls, defaults, path):
    """The flags of `config_cls` below `path`; `defaults` is the instance
    whose values are their defaults (`None`: the class defaults)."""
    hints = typing.get_type_hints(config_cls)
    specs = []
    for field in dataclasses.fields(config_cls):
        default = _default(field, defaults)
        annotation = unwrap_optional(hints[field.name])
        if dataclasses.is_dataclass(annotation):
            specs.extend(
                _picked(
                    _specs(annotation, default, path + (field.name,)),
                    field.metadata.get("flags"),
                    annotation,
                )
            )
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
                path=path + (field.name,),
                kind=kind,
                default=None if meta.get("required") else default,
                help=_help_with_range(meta["help"], meta.get("valid")),
                choices=meta.get("choices"),
                element_type=element_type,
                required=bool(meta.get("required")),
                valid=meta.get("valid"),
            )
        )
    return specs


def _default(field, defaults):
    """A field's default: its value in `defaults`, else the class's."""
    if defaults is None:
        return field_default(field)
    return getattr(defaults, field.name)


def _picked(specs, names, config_cls):
    """The specs `names` (`{name: outer name}`, or `None`: all) picks."""
    if names is None:
        return specs
    by_name = {spec.name: spec for spec in specs}
    unknown = sorted(set(names) - set(by_name))
    if unknown:
        raise TypeError(f"{config_cls.__name__} has no flag(s) {unknown}.")
    return [
        dataclasses.replace(by_name[name], name=outer)
        for name, outer in names.items()
    ]


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
    values = {
        spec.path: flag_values[spec.name].value
        for spec in flag_specs(config_cls)
    }
    return _build(config_cls, None, (), values, overrides)


def _build(config_cls, defaults, path, values, overrides):
    hints = typing.get_type_hints(config_cls)
    kwargs = {}
    for field in dataclasses.fields(config_cls):
        key = path + (field.name,)
        if not path and field.name in overrides:
            kwargs[field.name] = overrides[field.name]
        elif key in values:
            kwargs[field.name] = values[key]
        elif dataclasses.is_dataclass(unwrap_optional(hints[field.name])):
            kwargs[field.name] = _build(
                unwrap_optional(hints[field.name]),
                _default(field, defaults),
                key,
                values,
                {},
            )
        elif field.init:
            kwargs[field.name] = _default(field, defaults)
    return config_cls(**kwargs)
