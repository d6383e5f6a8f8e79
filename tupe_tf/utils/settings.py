"""Settings of configuration dataclasses: declared once, checked once.

A configuration dataclass is the one place a setting, its default and its
help text are written: `setting(default, help=...)` stores the help, the
valid range of a number (`valid=at_least(1)`, `greater_than(0)`,
`between(0, 1, high_open=True)`), the choices of a string, the flag name
and whether the flag is required as field metadata.
`tupe_tf.utils.config_flags` turns the fields into absl flags; this module
holds what needs no absl, so that layers and models may use it too.

Example:

>>> @dataclasses.dataclass
... class Config:
...     steps: int = setting(100, help="Training steps.", valid=at_least(1))
>>> check_settings(Config(steps=0))
Traceback (most recent call last):
...
tupe_tf.utils.errors.UserError: --steps=0 is out of range: it must be >= 1.
"""

import collections.abc
import dataclasses
import typing

from tupe_tf.utils.errors import UserError

SEQUENCE_ORIGINS = (list, tuple, collections.abc.Sequence)


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
            return f"{'>' if self.low_open else '>='} {number_text(self.low)}"
        if self.low is None:
            return f"{'<' if self.high_open else '<='} {number_text(self.high)}"
        return (
            f"in {'(' if self.low_open else '['}{number_text(self.low)}, "
            f"{number_text(self.high)}{')' if self.high_open else ']'}"
        )


def number_text(value):
    """A number as a flag would spell it (`1e-05`, `0.1`, `3`)."""
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


def unwrap_optional(annotation):
    """`X` for `Optional[X]`, else `annotation`."""
    if typing.get_origin(annotation) is typing.Union:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def list_element_type(annotation):
    """The element type of a list-like annotation, else `None`."""
    if annotation in (list, tuple):
        return str
    if typing.get_origin(annotation) not in SEQUENCE_ORIGINS:
        return None
    args = [a for a in typing.get_args(annotation) if a is not Ellipsis]
    return args[0] if args else str


def field_default(field):
    """A dataclass field's default value (`None` when it has none)."""
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return None


def nested(default_factory, *, flags):
    """A field holding a configuration nested in another one, Model Garden
    style: the outer config owns no copy of its settings, it overrides
    their defaults and picks which of them its script offers as flags.

    Args:
        default_factory: builds the nested config with the outer config's
            defaults.
        flags: the nested config's flags the outer script defines: their
            names, or a dict `{name: the outer flag name}` to rename them.
    """
    if not isinstance(flags, dict):
        flags = {name: name for name in flags}
    return dataclasses.field(
        default_factory=default_factory, metadata={"flags": flags}
    )


def setting_name(field, flag_names=None):
    """How messages name a field: its flag (`--name`, as `flag_names`
    renames it), or the bare field name for a setting without a flag."""
    flag = field.metadata.get("flag")
    if flag is False:
        return field.name
    flag = flag or field.name
    return f"--{(flag_names or {}).get(flag, flag)}"


def flag_name(config, name):
    """How messages name the field `name` of `config` (`setting_name`)."""
    fields = {field.name: field for field in dataclasses.fields(config)}
    return setting_name(fields[name])


class Settings:
    """Base of the configuration dataclasses: `validate()` is their one
    check, which library entry points call before building or writing
    anything (scripts reach it through them).

    Example:

    >>> @dataclasses.dataclass
    ... class Steps(Settings):
    ...     steps: int = setting(100, help="Steps.", valid=at_least(1))
    ...     def check_rules(self):
    ...         if self.steps == 13:
    ...             raise UserError("--steps=13 is unlucky.")
    >>> Steps(steps=7).validate()
    """

    def validate(self):
        """Refuses a setting outside its range or choices, anywhere in the
        tree (`check_settings`), then a combination that cannot work (each
        config's `check_rules`, the outer config first).

        Raises:
            UserError: naming the flag.
        """
        check_settings(self)
        for config in _configs_in(self):
            config.check_rules()

    def check_rules(self):
        """Refuses combinations of this config's own settings (nested
        configs check their own); none by default."""

    def replace(self, **changes):
        """A copy with `changes`; the change of a nested config may be a
        dict of its own changes (`pretrain=dict(seq_length=16)`)."""
        for name, value in changes.items():
            current = getattr(self, name, None)
            if isinstance(current, Settings) and isinstance(value, dict):
                changes[name] = current.replace(**value)
        return dataclasses.replace(self, **changes)


class SettingError(UserError):
    """A setting outside its declared choices, type or range
    (`check_settings`).

    Attributes:
        name: the field's name.
        value: the value refused.
        requirement: what a value must be (`"one of (...)"`, `">= 1"`,
            `"an int >= 1"`).
    """

    def __init__(self, message, name, value, requirement):
        super().__init__(message)
        self.name = name
        self.value = value
        self.requirement = requirement


def _configs_in(config):
    """`config` and every `Settings` nested in it, outer ones first."""
    yield config
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if isinstance(value, Settings):
            yield from _configs_in(value)


def check_settings(config, flag_names=None):
    """Refuses a setting of `config` (nested configs included) outside its
    declared choices, or a numeric one that is not a number of its type or
    lies outside its declared range. `Settings.validate` calls it.

    Args:
        config: a configuration dataclass instance.
        flag_names: `{flag: the name it has here}` for a nested config
            whose outer config renames its flags (`nested`).

    Raises:
        SettingError: `--name='value' is not one of [...]`, `--name=value
            is out of range: it must be <range>.` (a setting without a flag
            is named without the dashes), or `--name=value is not an int`
            (or `a number`).
    """
    hints = typing.get_type_hints(type(config))
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if dataclasses.is_dataclass(value):
            check_settings(value, field.metadata.get("flags") or flag_names)
            continue
        if value is None:
            continue
        name = setting_name(field, flag_names)
        choices = field.metadata.get("choices")
        if choices is not None and value not in choices:
            raise SettingError(
                f"{name}={value!r} is not one of {list(choices)}.",
                field.name,
                value,
                f"one of {choices}",
            )
        valid = field.metadata.get("valid")
        if valid is None:
            continue
        annotation = unwrap_optional(hints[field.name])
        integral = int in (annotation, list_element_type(annotation))
        elements = value if isinstance(value, (list, tuple)) else [value]
        for element in elements:
            _check_number(field.name, name, element, valid, integral)


def _check_number(field, name, value, valid, integral):
    kind = (int,) if integral else (int, float)
    if isinstance(value, bool) or not isinstance(value, kind):
        expected = "an int" if integral else "a number"
        raise SettingError(
            f"{name}={value!r} is not {expected}: it must be {valid}.",
            field,
            value,
            f"{expected} {valid}",
        )
    if value not in valid:
        raise SettingError(
            f"{name}={number_text(value)} is out of range: it must be {valid}.",
            field,
            value,
            str(valid),
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
        if _comparable(value) != _comparable(field_default(fields[name])):
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
    return number_text(value) if isinstance(value, float) else str(value)
