import dataclasses
import inspect

import pytest
from absl import flags

from tupe_tf.training import config as config_lib
from tupe_tf.utils import config_flags
from tupe_tf.utils.backbone_options import BACKBONE_OPTIONS
from tupe_tf.utils.settings import setting


def test_model_config_has_the_option_table_as_fields():
    fields = {f.name: f for f in dataclasses.fields(config_lib.ModelConfig)}
    dims = ["model_size", *config_lib.MODEL_SIZES["tiny"]]
    assert list(fields) == [o.name for o in BACKBONE_OPTIONS] + dims
    for option in BACKBONE_OPTIONS:
        assert fields[option.name].default == option.default
        assert fields[option.name].metadata["help"] == option.help
        assert fields[option.name].metadata["choices"] == option.choices


def test_backbone_kwargs_are_the_backbone_arguments():
    import tupe_tf

    kwargs = config_lib.ModelConfig(num_layers=3).backbone_kwargs(100)
    parameters = inspect.signature(tupe_tf.TupeBackbone.__init__).parameters
    assert set(kwargs) <= set(parameters)
    assert kwargs["num_layers"] == 3 and kwargs["vocabulary_size"] == 100
    assert kwargs["hidden_dim"] == config_lib.MODEL_SIZES["tiny"]["hidden_dim"]
    for option in BACKBONE_OPTIONS:
        assert kwargs[option.name] == option.default


def test_a_new_option_field_becomes_a_flag_and_a_kwarg():
    @dataclasses.dataclass
    class model_config(config_lib.ModelConfig):
        toy_scale: float = setting(2.0, help="A new option.")

    values = flags.FlagValues()
    config_flags.define_flags(model_config, values)
    assert values["toy_scale"].help == "A new option."
    values(["prog", "--toy_scale=3.5"])
    config = config_flags.config_from_flags(model_config, values)
    assert config.backbone_kwargs(10)["toy_scale"] == 3.5


def test_choices_are_checked_with_the_flag_name():
    config = config_lib.ModelConfig(position_encoding="rotary")
    with pytest.raises(ValueError, match="--position_encoding='rotary'"):
        config.validate()
    config_lib.ModelConfig(position_sharing=None).validate()


def test_pretrain_flags_round_trip_and_keep_their_defaults():
    values = flags.FlagValues()
    config_flags.define_flags(config_lib.PretrainConfig, values)
    values(["prog"])
    config = config_flags.config_from_flags(config_lib.PretrainConfig, values)
    # Flag defaults are the dataclass defaults (lists for sequences).
    assert config == config_lib.PretrainConfig(train_files=[], eval_files=[])
    assert config.model_dir == "./runs/default/model"
    values = flags.FlagValues()
    config_flags.define_flags(config_lib.PretrainConfig, values)
    values(
        [
            "prog",
            "--work_dir=/w",
            "--clipnorm=0",
            "--position_encoding=diet-abs",
            "--strategy=mirrored",
            "--train_files=a,b",
        ]
    )
    config = config_flags.config_from_flags(config_lib.PretrainConfig, values)
    assert config.model_dir == "/w/model"
    assert config.optimizer.clipnorm is None  # 0 disables clipping
    assert config.model.position_encoding == "diet-abs"
    assert config.runtime.strategy == "mirrored"
    assert config.train_files == ["a", "b"]


def test_glue_flags_parse_typed_lists():
    values = flags.FlagValues()
    config_flags.define_flags(config_lib.GlueConfig, values)
    values(["prog", "--learning_rates=1e-5,2e-5", "--seeds=7"])
    config = config_flags.config_from_flags(config_lib.GlueConfig, values)
    assert config.learning_rates == [1e-5, 2e-5]
    assert config.seeds == [7]
    assert config.verbose == 2


def test_learning_defaults_follow_the_model_size():
    tiny = config_lib.MODEL_SIZES["tiny"]["hidden_dim"]
    small = config_lib.MODEL_SIZES["small"]["hidden_dim"]
    base = config_lib.MODEL_SIZES["base"]["hidden_dim"]
    assert config_lib.default_pretrain_learning_rate(tiny) == 1e-3
    assert config_lib.default_pretrain_learning_rate(small) == 1e-4
    assert config_lib.default_finetune_recipe(small) == {
        "learning_rates": (1e-3,),
        "num_epochs": 3,
    }
    assert config_lib.default_finetune_recipe(base) == {
        "learning_rates": (2e-5, 3e-5, 4e-5, 5e-5),
        "num_epochs": 10,
    }
    # Unset flags stay unset until the model is known.
    values = flags.FlagValues()
    config_flags.define_flags(config_lib.GlueConfig, values)
    values(["prog"])
    glue = config_flags.config_from_flags(config_lib.GlueConfig, values)
    assert glue.learning_rates is None and glue.num_epochs is None


def test_pretraining_learning_rate_is_resolved_from_the_dims():
    from tupe_tf.training.pretrain_model import resolve_learning_rate

    def resolved(**model):
        config = config_lib.PretrainConfig(
            model=config_lib.ModelConfig(**model)
        )
        return resolve_learning_rate(config).optimizer.learning_rate

    assert resolved(model_size="tiny") == 1e-3
    assert resolved(model_size="base") == 1e-4
    assert resolved(model_size="base", hidden_dim=96, num_heads=2) == 1e-3
    given = config_lib.PretrainConfig(
        optimizer=config_lib.OptimizerConfig(learning_rate=5e-4)
    )
    assert resolve_learning_rate(given) is given


@pytest.mark.parametrize(
    "config_cls, misspelt, hint",
    [
        (
            config_lib.PretrainConfig,
            "num_train_step",
            "(did you mean `num_train_steps`?)",
        ),
        (
            config_lib.PretrainConfig,
            "learning_rate",
            "(it belongs in `optimizer=OptimizerConfig(learning_rate=...)`)",
        ),
        (
            config_lib.PretrainConfig,
            "position_encoding",
            "(it belongs in `model=ModelConfig(position_encoding=...)`)",
        ),
        (config_lib.GlueConfig, "tsak", "(did you mean `task`?)"),
        (config_lib.GlueConfig, "strategy", "`runtime=RuntimeConfig("),
        (
            config_lib.ModelConfig,
            "positon_rank",
            "(did you mean `position_rank`?)",
        ),
        (config_lib.OptimizerConfig, "warmup_step", "`warmup_steps`?"),
        (config_lib.RuntimeConfig, "mixed_precison", "`mixed_precision`?"),
    ],
)
def test_configs_refuse_misspelt_fields_with_a_suggestion(
    config_cls, misspelt, hint
):
    with pytest.raises(TypeError) as error:
        config_cls(**{misspelt: 1})
    message = str(error.value)
    assert message.startswith(
        f"{config_cls.__name__} got unknown keyword argument(s) `{misspelt}`"
    )
    assert hint in message


def test_visualize_config_refuses_misspelt_fields():
    from tupe_tf.analysis.visualize import VisualizeConfig

    with pytest.raises(TypeError, match="did you mean `sequence_length`"):
        VisualizeConfig(preset="p", sequence_lenght=8)
