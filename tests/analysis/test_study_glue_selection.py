"""The study's GLUE rows choose a learning rate on the selection split, and
fine-tuning records of another selection protocol are never mixed in."""

import json

import pytest

from tupe_tf.analysis import compare
from tupe_tf.analysis import study_findings_tuning
from tupe_tf.analysis import study_records
from tupe_tf.analysis import study_summary
from tupe_tf.utils.errors import UserError


def _config(tmp_path, rates=(3e-4, 1e-3)):
    return compare.CompareConfig(
        glue_tasks=["sst2"], results_dir=str(tmp_path)
    ).replace(finetune=dict(seeds=[0, 1, 2], learning_rates=list(rates)))


def _runs(config, learning_rate, scores, selection=None):
    return [
        dict(
            variant="bert",
            task="sst2",
            recipe=config.glue_recipe(),
            learning_rate=learning_rate,
            pretrain_seed=0,
            seed=seed,
            metric="accuracy",
            score=score,
            **(
                {}
                if selection is None
                else {
                    "selection_score": selection[seed],
                    "selection_fraction": 0.1,
                }
            ),
        )
        for seed, score in enumerate(scores)
    ]


def test_rows_choose_on_the_selection_score(tmp_path):
    config = _config(tmp_path)
    # The evaluation scores favour 3e-4; the selection scores 1e-3.
    finetune = _runs(config, 3e-4, [0.9, 0.9, 0.9], [0.5, 0.5, 0.5]) + _runs(
        config, 1e-3, [0.7, 0.7, 0.7], [0.8, 0.8, 0.8]
    )
    row = study_summary.glue_summary(config, finetune, ["bert"])["sst2"]["bert"]
    assert (row["learning_rate"], row["chosen_on"]) == (1e-3, "selection")
    assert row["score"]["median"] == 0.7  # reported: the evaluation score
    # Records from before selection splits: chosen on the evaluation score
    # itself, and the row says so; one rate: nothing chosen.
    legacy = _runs(config, 3e-4, [0.9] * 3) + _runs(config, 1e-3, [0.7] * 3)
    row = study_summary.glue_summary(config, legacy, ["bert"])["sst2"]["bert"]
    assert (row["learning_rate"], row["chosen_on"]) == (3e-4, "evaluation")
    single = _config(tmp_path, rates=[1e-3])
    row = study_summary.glue_summary(single, legacy, ["bert"])["sst2"]["bert"]
    assert row["chosen_on"] is None


def test_records_of_another_selection_protocol_are_not_mixed(tmp_path):
    config = _config(tmp_path)
    directory = tmp_path / config.name / "finetune"
    directory.mkdir(parents=True)
    study_records.check_glue_selection(config)  # no records yet
    (legacy,) = _runs(config, 1e-3, [0.7])
    (directory / "legacy.json").write_text(json.dumps(legacy))
    with pytest.raises(UserError, match="selection fraction"):
        study_records.check_glue_selection(config)
    (carved,) = _runs(config, 3e-4, [0.7], [0.5])
    (directory / "carved.json").write_text(json.dumps(carved))
    with pytest.raises(UserError, match="mix selection fractions"):
        study_records.load_results(config)
    (directory / "legacy.json").unlink()
    study_records.check_glue_selection(config)
    assert len(study_records.load_results(config)[1]) == 1


def test_other_views_report_each_rate_without_choosing(tmp_path):
    config = _config(tmp_path, rates=[1e-3])
    finetune = [
        dict(run, variant=variant)
        for variant in ("no-pretraining", "bert")
        for run in _runs(config, 3e-4, [0.9] * 3)
        + _runs(config, 1e-3, [0.7] * 3)
    ]
    views = study_findings_tuning.other_glue_selections(config, finetune)
    # The configured rate is tables.md's; the other one gets a view of its
    # own, and no view holds two rates to choose between.
    assert [title for title, _ in views] == [
        "every row at learning rate 0.0003 (the 2 models fine-tuned at it)"
    ]
    ((_, view),) = views
    rows = study_summary.glue_summary(view, finetune, ["bert"])["sst2"]
    assert {(r["learning_rate"], r["chosen_on"]) for r in rows.values()} == {
        (3e-4, None)
    }
