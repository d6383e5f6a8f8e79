"""Every numeric flag of every configuration declares its valid range, its
help shows it, and a value outside it is refused with the one message."""

import dataclasses

import pytest
from absl import flags

from data_pipeline.shard_config import ShardConfig
from data_pipeline.vocab import VocabConfig
from tupe_tf.analysis.study_config import CompareConfig
from tupe_tf.analysis.visualize import VisualizeConfig
from tupe_tf.export import ExportSettings
from tupe_tf.training.config import GlueConfig
from tupe_tf.training.config import PretrainConfig
from tupe_tf.utils import config_flags
from tupe_tf.utils.errors import UserError

CONFIGS = (
    ShardConfig,
    VocabConfig,
    PretrainConfig,
    GlueConfig,
    CompareConfig,
    VisualizeConfig,
    ExportSettings,
)


def _number_type(spec):
    """`int` or `float` for a numeric flag (a list of them too), else
    `None`."""
    kind = spec.element_type if spec.kind == "list" else spec.kind
    kind = getattr(kind, "__name__", kind)
    return {"int": int, "float": float}.get(kind)


def _text(value):
    return f"{value:g}" if isinstance(value, float) else str(value)


def _outside(valid, number_type):
    """One value just below the low end and one just above the high end
    (those that exist), each as the flag parses it."""
    step = 1 if number_type is int else 0.5
    values = []
    if valid.low is not None:
        low = number_type(valid.low)
        values.append(low if valid.low_open else low - step)
    if valid.high is not None:
        high = number_type(valid.high)
        values.append(high if valid.high_open else high + step)
    return values


def _inside(valid, number_type):
    if valid.low is not None and valid.high is not None:
        middle = (valid.low + valid.high) / 2
        return number_type(middle) if number_type is float else int(middle)
    if valid.low is not None:
        return number_type(valid.low) + 1
    return number_type(valid.high) - 1


def _required_flags(config_cls):
    """A value for each required flag (none of them is checked here)."""
    arguments = []
    for spec in config_flags.flag_specs(config_cls):
        if spec.required:
            value = spec.choices[0] if spec.choices else "x"
            arguments.append(f"--{spec.name}={value}")
    return arguments


def _out_of_range_cases():
    for config_cls in CONFIGS:
        for spec in config_flags.flag_specs(config_cls):
            if spec.valid is None:
                continue
            number_type = _number_type(spec)
            for value in _outside(spec.valid, number_type):
                yield pytest.param(
                    config_cls,
                    spec,
                    value,
                    id=f"{config_cls.__name__}-{spec.name}={_text(value)}",
                )


@pytest.mark.parametrize("config_cls,spec,value", _out_of_range_cases())
def test_a_value_outside_the_range_is_refused(config_cls, spec, value):
    argument = _text(value)
    if spec.kind == "list":  # One bad element after a good one.
        good = _inside(spec.valid, _number_type(spec))
        argument = f"{_text(good)},{argument}"
    flag_values = flags.FlagValues()
    config_flags.define_flags(config_cls, flag_values)
    flag_values(
        ["prog", f"--{spec.name}={argument}"] + _required_flags(config_cls)
    )
    assert flag_values[spec.name].help.endswith(f" Valid: {spec.valid}.")
    with pytest.raises(UserError) as error:
        config_flags.config_from_flags(config_cls, flag_values).validate()
    assert str(error.value) == (
        f"--{spec.name}={_text(value)} is out of range: it must be "
        f"{spec.valid}."
    )


@pytest.mark.parametrize(
    "config_cls,spec,value",
    [
        case
        for case in _out_of_range_cases()
        if case.values[0] in (ShardConfig, VocabConfig)
    ],
)
def test_validate_refuses_the_same_value(config_cls, spec, value):
    """Library callers, who build the config themselves, get the same
    refusal from `validate()`."""
    flag_values = flags.FlagValues()
    config_flags.define_flags(config_cls, flag_values)
    flag_values(["prog"] + _required_flags(config_cls))
    config = config_flags.config_from_flags(config_cls, flag_values)
    if spec.kind == "list":
        value = [value]
    config = dataclasses.replace(config, **{spec.path[-1]: value})
    with pytest.raises(UserError, match="is out of range: it must be"):
        config.validate()


@pytest.mark.parametrize("config_cls", CONFIGS, ids=lambda c: c.__name__)
def test_every_numeric_flag_declares_a_range(config_cls):
    unranged = {
        spec.name
        for spec in config_flags.flag_specs(config_cls)
        if _number_type(spec) is not None and spec.valid is None
    }
    assert not unranged, (
        f"{config_cls.__name__}: numeric flag(s) {sorted(unranged)} declare "
        "no range: add valid=... to their setting."
    )
