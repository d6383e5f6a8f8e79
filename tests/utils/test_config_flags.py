import dataclasses
from typing import Optional
from typing import Sequence

import pytest
from absl import flags

from tupe_tf.utils import config_flags
from tupe_tf.utils import settings
from tupe_tf.utils.errors import UserError
from tupe_tf.utils.settings import setting


@dataclasses.dataclass
class Inner:
    rate: float = setting(0.5, help="A rate.")
    mode: Optional[str] = setting(None, help="A mode.", choices=("a", "b"))


@dataclasses.dataclass
class Outer:
    steps: int = setting(10, help="Steps.")
    name: Optional[str] = setting(None, help="A name.")
    fast: bool = setting(True, help="Go fast.")
    seeds: Sequence[int] = setting((0, 1), help="Seeds.")
    files: Sequence[str] = setting((), help="Files.", flag="input")
    internal: int = setting(3, help="Library only.", flag=False)
    inner: Inner = dataclasses.field(default_factory=Inner)


def _parse(cls, argv):
    values = flags.FlagValues()
    config_flags.define_flags(cls, values)
    values(["prog"] + argv)
    return values


def test_every_field_becomes_a_flag_with_its_help_and_default():
    values = _parse(Outer, [])
    assert values["steps"].default == 10
    assert values["steps"].help == "Steps."
    assert values["seeds"].default == [0, 1]
    assert values["mode"].help.endswith("A mode.")
    assert "internal" not in values
    assert "files" not in values and values["input"].help == "Files."
    # Defaults round trip to the dataclass's own defaults.
    assert config_flags.config_from_flags(Outer, values) == Outer(
        seeds=[0, 1], files=[]
    )


def test_a_new_field_becomes_a_flag_without_other_edits():
    @dataclasses.dataclass
    class Grown(Outer):
        warmup: float = setting(0.25, help="The new setting.")

    values = _parse(Grown, ["--warmup=0.75"])
    assert values["warmup"].help == "The new setting."
    assert values["warmup"].default == 0.25
    assert config_flags.config_from_flags(Grown, values).warmup == 0.75


def test_round_trip_of_parsed_flags():
    values = _parse(
        Outer,
        [
            "--steps=3",
            "--name=x",
            "--nofast",
            "--seeds=4,5,6",
            "--input=a.txt,b.txt",
            "--rate=0.125",
            "--mode=b",
        ],
    )
    config = config_flags.config_from_flags(Outer, values)
    assert config == Outer(
        steps=3,
        name="x",
        fast=False,
        seeds=[4, 5, 6],
        files=["a.txt", "b.txt"],
        inner=Inner(rate=0.125, mode="b"),
    )
    assert config_flags.config_from_flags(Outer, values, steps=9).steps == 9


def test_bad_values_are_refused_at_parse_time_naming_the_flag():
    with pytest.raises(flags.IllegalFlagValueError, match="seeds"):
        _parse(Outer, ["--seeds=1,x"])
    with pytest.raises(flags.IllegalFlagValueError, match="mode"):
        _parse(Outer, ["--mode=c"])


def test_missing_help_and_name_clashes_are_refused():
    @dataclasses.dataclass
    class NoHelp:
        steps: int = 1

    with pytest.raises(TypeError, match="NoHelp.steps has no help"):
        config_flags.define_flags(NoHelp, flags.FlagValues())

    @dataclasses.dataclass
    class Clash:
        rate: float = setting(1.0, help="Clashes with Inner.rate.")
        inner: Inner = dataclasses.field(default_factory=Inner)

    with pytest.raises(TypeError, match="rate"):
        config_flags.define_flags(Clash, flags.FlagValues())


def test_required_flags():
    @dataclasses.dataclass
    class Needs:
        output: str = setting("", help="Output.", required=True)

    values = flags.FlagValues()
    config_flags.define_flags(Needs, values)
    with pytest.raises(flags.IllegalFlagValueError, match="output"):
        values(["prog"])


def test_validate_errors_name_the_flag_and_bugs_keep_their_type():
    @dataclasses.dataclass
    class Checked(settings.Settings):
        input_patterns: str = setting("x", help="Input.", flag="input")
        batch: int = setting(1, help="Batch.", flag=False)

        def check_rules(self):
            if not self.input_patterns:
                raise UserError(
                    f"{settings.flag_name(self, 'input_patterns')}: must not "
                    "be empty."
                )
            if self.input_patterns == "bug":
                raise ValueError("input_patterns: a bug, not a user error.")

    assert settings.flag_name(Checked(), "batch") == "batch"
    values = _parse(Checked, ["--input="])
    with pytest.raises(UserError, match="^--input: must not be empty"):
        config_flags.config_from_flags(Checked, values).validate()
    values = _parse(Checked, ["--input=bug"])
    with pytest.raises(ValueError, match="^input_patterns: a bug") as error:
        config_flags.config_from_flags(Checked, values).validate()
    assert not isinstance(error.value, UserError)


@dataclasses.dataclass
class Ranged(settings.Settings):
    rate: float = setting(0.1, help="A rate.", valid=settings.greater_than(0))
    ratio: float = setting(
        0.0, help="A ratio.", valid=settings.between(0, 1, high_open=True)
    )
    steps: Optional[int] = setting(
        None, help="Steps.", valid=settings.at_least(1)
    )
    seeds: Sequence[int] = setting(
        (0,), help="Seeds.", valid=settings.at_least(0)
    )


@pytest.mark.parametrize(
    "valid, inside, outside, text",
    [
        (settings.greater_than(0), [1e-9, 5], [0, -1], "> 0"),
        (settings.at_least(1), [1, 7], [0, -3], ">= 1"),
        (
            settings.between(0, 1, high_open=True),
            [0, 0.5],
            [1, -0.1],
            "in [0, 1)",
        ),
        (
            settings.between(0.5, 2.5),
            [0.5, 2.5],
            [0.4, 2.6],
            "in [0.5, 2.5]",
        ),
    ],
)
def test_a_range_holds_its_values_and_says_what_it_is(
    valid, inside, outside, text
):
    assert all(value in valid for value in inside)
    assert not any(value in valid for value in outside)
    assert str(valid) == text


def test_the_flag_help_shows_the_range():
    values = _parse(Ranged, [])
    assert values["ratio"].help == "A ratio. Valid: in [0, 1)."


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--rate=-1"], "--rate=-1 is out of range: it must be > 0."),
        (["--ratio=1"], "--ratio=1 is out of range: it must be in [0, 1)."),
        (["--steps=0"], "--steps=0 is out of range: it must be >= 1."),
        (["--seeds=0,-2"], "--seeds=-2 is out of range: it must be >= 0."),
    ],
)
def test_a_flag_outside_its_range_is_refused_naming_it(argv, message):
    from tupe_tf.utils.errors import UserError

    values = _parse(Ranged, argv)
    with pytest.raises(UserError) as error:
        config_flags.config_from_flags(Ranged, values).validate()
    assert str(error.value) == message


def test_values_inside_their_ranges_and_unset_optionals_pass():
    values = _parse(Ranged, ["--rate=0.5", "--ratio=0", "--seeds=3"])
    config = config_flags.config_from_flags(Ranged, values)
    config.validate()
    assert config == Ranged(rate=0.5, ratio=0.0, steps=None, seeds=[3])


@dataclasses.dataclass
class Chosen:
    mode: Optional[str] = setting("a", help="Mode.", choices=("a", "b"))
    ranged: Ranged = dataclasses.field(default_factory=Ranged)


def test_a_value_outside_its_choices_is_refused_anywhere_in_the_tree():
    with pytest.raises(
        UserError, match=r"^--mode='c' is not one of \['a', 'b'\]\.$"
    ):
        settings.check_settings(Chosen(mode="c"))
    with pytest.raises(UserError, match="^--rate=0 is out of range"):
        settings.check_settings(Chosen(ranged=Ranged(rate=0)))
    settings.check_settings(Chosen(mode=None))


@dataclasses.dataclass
class LibraryOnly:
    batch: int = setting(
        8, help="Batch.", flag=False, valid=settings.at_least(1)
    )


@pytest.mark.parametrize(
    "config, message",
    [
        (Ranged(steps="3"), "--steps='3' is not an int: it must be >= 1."),
        (Ranged(steps=True), "--steps=True is not an int: it must be >= 1."),
        (Ranged(rate="x"), "--rate='x' is not a number: it must be > 0."),
        (LibraryOnly(batch=0), "batch=0 is out of range: it must be >= 1."),
    ],
)
def test_library_built_configs_are_checked_for_type_and_range(config, message):
    from tupe_tf.utils.errors import UserError

    with pytest.raises(UserError) as error:
        settings.check_settings(config)
    assert str(error.value) == message
    assert settings.check_settings(Ranged(rate=2, steps=4)) is None


@dataclasses.dataclass
class Masking:
    static: bool = setting(False, help="Static masking.")
    rate: float = setting(0.15, help="Masked fraction.")
    fields: Sequence[str] = setting(("text",), help="Fields.")


@pytest.mark.parametrize(
    "config, message",
    [
        (Masking(rate=0.2), "--rate=0.2 only applies with --static"),
        (Masking(fields=["a", "b"]), "--fields=a,b only applies with --static"),
    ],
)
def test_a_setting_that_would_be_ignored_is_refused(config, message):
    from tupe_tf.utils.errors import UserError

    with pytest.raises(UserError, match=message):
        settings.refuse_ignored(
            config, ("rate", "fields"), config.static, "with --static"
        )


def test_defaults_or_a_holding_condition_are_not_refused():
    names = ("rate", "fields")
    settings.refuse_ignored(Masking(), names, False, "with --static")
    settings.refuse_ignored(
        Masking(static=True, rate=0.3), names, True, "with --static"
    )


def test_a_list_flag_equal_to_its_tuple_default_is_not_refused():
    settings.refuse_ignored(
        Masking(fields=["text"]), ("fields",), False, "with --static"
    )


@dataclasses.dataclass
class Study(settings.Settings):
    """Nests `Ranged`, Model Garden style: other defaults, picked flags."""

    label: str = setting("study", help="A label.")
    run: Ranged = settings.nested(
        lambda: Ranged(steps=5), flags={"steps": "run_steps", "rate": "rate"}
    )


def test_a_nested_config_picks_renames_and_overrides_its_flags():
    values = flags.FlagValues()
    config_flags.define_flags(Study, values)
    assert "run_steps" in values and "steps" not in values
    assert values["run_steps"].default == 5  # the outer config's default
    values(["prog", "--run_steps=0"])
    config = config_flags.config_from_flags(Study, values)
    assert config.run == Ranged(steps=0)
    # The refusal names the flag as the outer script defines it.
    with pytest.raises(UserError, match=r"^--run_steps=0 is out of range"):
        config.validate()
    assert Study().replace(run=dict(rate=0.25)).run == Ranged(
        steps=5, rate=0.25
    )
    with pytest.raises(TypeError, match="no flag"):
        config_flags.flag_specs(
            dataclasses.make_dataclass(
                "Bad",
                [("run", Ranged, settings.nested(Ranged, flags=("speed",)))],
            )
        )
