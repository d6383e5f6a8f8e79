"""The study's plan and settings, without training: the order of the runs,
what is fine-tuned and extended, refused settings and where results go."""

import os

import pytest

from tests.analysis.micro_study import NO_GLUE
from tests.analysis.micro_study import SEQ
from tests.analysis.micro_study import XLA
from tests.analysis.micro_study import micro_config
from tupe_tf.analysis import compare
from tupe_tf.analysis import study_records
from tupe_tf.analysis.study_config import CONTROL
from tupe_tf.analysis.study_config import VARIANTS
from tupe_tf.utils.errors import UserError


def test_plan_runs_the_core_variants_first_each_fine_tuned_at_once(
    tmp_path, tiny_data
):
    config = micro_config(
        tmp_path,
        tiny_data,
        variants=["bert", "tupe-a", "tupe-r"],
        seeds=[0, 1, 2],
        glue_variants=["bert", "tupe-r"],
        finetune=dict(seeds=[0, 1]),
    )
    keys = [run.key for run in compare.plan_runs(config)]
    control = "finetune/no-pretraining__pseed0__sst2__lr0.001__ep1__seed"
    assert keys[:2] == [control + "0", control + "1"]
    assert keys[2:5] == [
        "pretrain/bert__seed0",
        "finetune/bert__pseed0__sst2__lr0.001__ep1__seed0",
        "finetune/bert__pseed0__sst2__lr0.001__ep1__seed1",
    ]
    assert keys[5] == "pretrain/tupe-r__seed0"
    # The core variants' other seeds come before the other variants;
    # tupe-a (not core, not in glue_variants) gets only seed 0 and no
    # fine-tuning.
    assert keys[8:] == [
        "pretrain/bert__seed1",
        "pretrain/bert__seed2",
        "pretrain/tupe-r__seed1",
        "pretrain/tupe-r__seed2",
        "pretrain/tupe-a__seed0",
    ]


def test_listed_pretraining_seeds_are_fine_tuned_after_their_pretraining(
    tmp_path, tiny_data
):
    config = micro_config(
        tmp_path,
        tiny_data,
        variants=["bert", "rope"],
        seeds=[0, 1, 2],
        other_seeds=[0, 1],
        glue_variants=["bert", "rope"],
        glue_pretrain_seeds=[0, 2],
    )
    config.validate()
    tuned = "__sst2__lr0.001__ep1__seed0"
    assert [run.key for run in compare.plan_runs(config)] == [
        f"finetune/no-pretraining__pseed0{tuned}",
        "pretrain/bert__seed0",
        f"finetune/bert__pseed0{tuned}",
        "pretrain/bert__seed1",
        "pretrain/bert__seed2",
        f"finetune/bert__pseed2{tuned}",
        "pretrain/rope__seed0",
        f"finetune/rope__pseed0{tuned}",
        "pretrain/rope__seed1",  # rope has no seed 2: nothing to fine-tune.
    ]
    config.glue_pretrain_seeds = [0, 3]
    with pytest.raises(UserError, match=r"--glue_pretrain_seeds \[3\]"):
        config.validate()


def test_fine_tuned_variants_default_to_the_core_four(tmp_path, tiny_data):
    config = micro_config(
        tmp_path, tiny_data, variants=["bert", "tupe-a", "diet-rel"]
    )
    tuned = {
        run.variant
        for run in compare.plan_runs(config)
        if run.kind != "pretrain"
    }
    assert tuned == {CONTROL, "bert", "diet-rel"}


def test_plan_extends_each_listed_pretraining_seed(tmp_path, tiny_data):
    config = micro_config(
        tmp_path,
        tiny_data,
        variants=["bert", "rope"],
        seeds=[0, 1],
        other_seeds=[0, 1],
        extension_steps=2,
        extension_seeds=[0, 1],
        extension_train_files=tiny_data["eval"][2 * SEQ],
        **NO_GLUE,
    )
    config.validate()
    assert [r.key for r in compare.plan_runs(config)][-4:] == [
        "extend/bert__seed0__steps2",
        "extend/rope__seed0__steps2",
        "extend/bert__seed1__steps2",
        "extend/rope__seed1__steps2",
    ]
    # Unset: the first seed's models only.
    first = config.replace(extension_seeds=None)
    assert [r.key for r in compare.plan_runs(first) if r.kind == "extend"] == [
        "extend/bert__seed0__steps2",
        "extend/rope__seed0__steps2",
    ]
    with pytest.raises(UserError, match=r"--extension_seeds \[3\]"):
        config.replace(extension_seeds=[3]).validate()


def test_variants_come_from_the_option_table():
    from tupe_tf.utils.backbone_options import POSITION_ENCODINGS

    assert list(VARIANTS)[: len(POSITION_ENCODINGS)] == list(POSITION_ENCODINGS)
    assert VARIANTS["tupe-a-tie-cls"] == {
        "position_encoding": "tupe-a",
        "untie_cls": False,
    }


def test_changed_settings_are_refused(tmp_path, tiny_data):
    study_records.check_study_settings(micro_config(tmp_path, tiny_data))
    with pytest.raises(UserError, match="learning_rate"):
        study_records.check_study_settings(
            micro_config(
                tmp_path,
                tiny_data,
                pretrain=dict(optimizer=dict(learning_rate=3e-3)),
            )
        )
    # Fine-tuning results of another recipe would silently drop out of the
    # GLUE table: refused too.
    with pytest.raises(UserError, match="glue_recipe"):
        study_records.check_study_settings(
            micro_config(tmp_path, tiny_data, **XLA)
        )


def test_bad_compare_config_is_refused(tmp_path):
    with pytest.raises(UserError, match="--variants"):
        compare.CompareConfig(variants=["tupe-x"]).validate()
    with pytest.raises(UserError, match="--glue_variants"):
        compare.CompareConfig(glue_variants=["tupe-x"]).validate()
    with pytest.raises(UserError, match="--glue_dir"):
        compare.CompareConfig().replace(
            finetune=dict(glue_dir=str(tmp_path / "missing"))
        ).validate()
    with pytest.raises(UserError, match="--extrapolation_factors"):
        compare.CompareConfig(extrapolation_factors=[1]).validate()
    with pytest.raises(UserError, match="--beyond_table_factors"):
        compare.CompareConfig(beyond_table_factors=[4]).validate()


def test_misspelt_setting_is_refused_with_the_closest_name():
    with pytest.raises(TypeError, match="did you mean `glue_variants`"):
        compare.CompareConfig(glue_variant=["bert"])
    with pytest.raises(TypeError, match="did you mean `seeds`"):
        compare.CompareConfig().replace(finetune=dict(seed=[0]))


def test_results_and_figures_go_under_the_output_dir_by_default(tmp_path):
    config = compare.CompareConfig(output_dir=str(tmp_path / "study"))
    name = config.name
    assert config.study_results_dir == str(tmp_path / "study/results" / name)
    assert config.study_figures_dir == str(tmp_path / "study/figures" / name)
    assert not compare.CompareConfig().study_results_dir.startswith("docs")
    assert not compare.CompareConfig().study_figures_dir.startswith("docs")
    # The committed study names its places explicitly.
    committed = compare.CompareConfig(
        results_dir="docs/results", figures_dir="docs/figures/compare"
    )
    assert committed.study_results_dir == f"docs/results/{name}"
    assert committed.study_figures_dir == f"docs/figures/compare/{name}"
    # A report of no runs writes its tables there and nothing elsewhere.
    out = compare.report(config)
    assert out["figures"] == [] and out["pending"]
    assert os.listdir(tmp_path) == ["study"]
    assert os.listdir(tmp_path / "study" / "results" / name) == ["tables.md"]


def test_a_damaged_result_file_is_refused_naming_it(tmp_path):
    config = compare.CompareConfig(output_dir=str(tmp_path))
    damaged = os.path.join(
        config.study_results_dir, "pretrain", "bert__seed0.json"
    )
    os.makedirs(os.path.dirname(damaged))
    with open(damaged, "w") as f:
        f.write('{"variant": "be')
    with pytest.raises(UserError, match="bert__seed0.json cannot be read"):
        compare.report(config)
