"""The comparison study at a micro scale: real shards, real training."""

import dataclasses
import json
import os
from pathlib import Path

import pytest

import tupe_tf
from tests.analysis.micro_study import NO_GLUE
from tests.analysis.micro_study import SEQ
from tests.analysis.micro_study import micro_config
from tupe_tf.analysis import compare
from tupe_tf.analysis import study_records
from tupe_tf.analysis import study_summary
from tupe_tf.utils.errors import UserError


def _read(path):
    return json.loads(Path(path).read_text())


def _evaluate(model_or_preset, files, vocab, *lengths):
    """`{length: held-out loss}` of a preset (or model)."""
    from tupe_tf.analysis import study_data

    model = model_or_preset
    if isinstance(model, str):
        model = study_data.load_masked_lm(model)
    losses = study_data.heldout_losses(model, files, vocab, lengths)
    return {str(n): losses[n]["loss"] for n in lengths}


def _recompute_from_models(config, data):
    """The held-out losses the records hold, evaluated again from the
    models on this machine (before the study loses them)."""
    from tupe_tf.analysis import study_data
    from tupe_tf.analysis import study_extension
    from tupe_tf.analysis import study_plan
    from tupe_tf.analysis.study_plan import Run

    files, vocab = data["eval"], data["vocab"]
    short, long = SEQ, 2 * SEQ
    found = {"extend": {}, "scaled": {}}
    for variant in ("bert", "rope"):
        preset = study_plan.preset_dir(config, variant, 0)
        run = Run("extend", variant, 0, pretrain_seed=0, steps=2)
        extended = os.path.join(
            study_extension.model_dir(config, run), "preset"
        )
        trained = study_data.load_masked_lm(preset)
        # The rule's refill, done here by hand: rows 16-31 of the position
        # table (bert's only) repeat rows 0-15.
        refilled = study_data.rebuilt(trained, {})
        tables = [w for w in refilled.weights if "position" in w.path]
        assert len(tables) == (variant == "bert")
        for table in tables:
            value = table.numpy()
            value[short:] = value[:short]
            table.assign(value)
        found["extend"][variant] = {
            "trained": _evaluate(trained, files, vocab, short, long),
            "refilled": _evaluate(refilled, files, vocab, long),
            "extended": _evaluate(extended, files, vocab, short, long),
        }
    rope = study_data.load_masked_lm(study_plan.preset_dir(config, "rope", 0))
    for scaling in ("linear", "ntk", "yarn"):
        for n in (2 * SEQ, 4 * SEQ):
            overrides = dict(
                max_sequence_length=4 * SEQ,
                rope_scaling=scaling,
                rope_scaling_factor=n / SEQ,
            )
            if scaling == "yarn":
                overrides["rope_trained_length"] = SEQ
            model = study_data.rebuilt(rope, overrides)
            assert model.backbone.rope_scaling == scaling
            found["scaled"].setdefault(scaling, {}).update(
                _evaluate(model, files, vocab, n)
            )
    return found


@pytest.fixture(scope="module")
def study(tmp_path_factory, tiny_data):
    """One micro study of bert (fine-tuned) and rope, every model extended,
    run through the stages a real study goes through: stopped part-way,
    resumed, an old record completed, continued on a machine without its
    models, and extended with a seed. Returns what each stage left, for
    the tests below to check (each test once ran a study of its own)."""
    import shutil

    root = tmp_path_factory.mktemp("study")
    config = micro_config(
        root,
        tiny_data,
        variants=["bert", "rope"],
        seeds=[0],
        extension_steps=2,
        extension_train_files=tiny_data["eval"][2 * SEQ],
    )
    results = Path(config.study_results_dir)
    stage = {"config": config, "results": results}

    # Stopped part-way: the control's fine-tuning and bert's pre-training.
    compare.run_comparison(dataclasses.replace(config, max_runs=2))
    stage["part_way"] = sorted(os.listdir(results / "pretrain"))
    bert_record = results / "pretrain" / "bert__seed0.json"
    stage["bert_stamp"] = bert_record.stat().st_mtime_ns

    # Resumed to the end.
    stage["out"] = compare.run_comparison(config)
    stage["bert_stamp_resumed"] = bert_record.stat().st_mtime_ns
    stage["pretrained"] = sorted(os.listdir(results / "pretrain"))
    stage["records"] = {
        str(p.relative_to(results)): _read(p) for p in results.glob("*/*.json")
    }
    stage["tables"] = (results / "tables.md").read_text()
    stage["figures"] = {
        p: open(p, "rb").read() for p in stage["out"]["figures"]
    }
    tuned = "bert__pseed0__sst2__lr0.001__ep1__seed0"
    stage["glue_results"] = _read(
        Path(config.study_output_dir) / "glue" / tuned / "sst2" / "results.json"
    )
    stage["recomputed"] = _recompute_from_models(config, tiny_data)

    # A rope record from before the beyond-table lengths gets them from its
    # model, without pre-training again.
    rope_path = results / "pretrain" / "rope__seed0.json"
    rope = stage["records"]["pretrain/rope__seed0.json"]
    old = dict(
        rope, heldout_loss_by_length=dict(rope["heldout_loss_by_length"])
    )
    del old["heldout_loss_by_length"][str(4 * SEQ)]
    del old["rope_scaled_loss_by_length"]
    study_records.write_json(str(rope_path), old)
    compare.run_comparison(config)
    stage["completed"] = _read(rope_path)

    # A new machine without the models: the report from the records alone.
    shutil.rmtree(root / "runs")
    os.remove(results / "tables.md")
    stage["report"] = compare.report(config)
    stage["tables_again"] = (results / "tables.md").read_text()
    stage["figures_again"] = {p: open(p, "rb").read() for p in stage["figures"]}

    # There, the old rope record is pre-trained again (its model is gone),
    # and a lost fine-tuning pre-trains its model again first.
    study_records.write_json(str(rope_path), old)
    (results / "finetune" / f"{tuned}.json").unlink()
    compare.run_comparison(config)
    stage["rope_again"] = _read(rope_path)
    stage["bert_stamp_rerun"] = bert_record.stat().st_mtime_ns
    stage["rerun"] = _read(results / "rerun" / "pretrain" / "bert__seed0.json")
    stage["retuned"] = (results / "finetune" / f"{tuned}.json").is_file()
    stage["findings"] = (results / "findings.md").read_text()

    # Adding a seed to one variant, extended too, runs only that seed.
    more = micro_config(
        root,
        tiny_data,
        variants=["bert"],
        seeds=[0, 1],
        extension_steps=2,
        extension_seeds=[0, 1],
        extension_train_files=tiny_data["eval"][2 * SEQ],
        finetune=NO_GLUE["finetune"],
    )
    stage["more_out"] = compare.run_comparison(more)
    stage["bert_stamp_more"] = bert_record.stat().st_mtime_ns
    stage["pretrained_more"] = sorted(os.listdir(results / "pretrain"))
    stage["extended_more"] = sorted(os.listdir(results / "extend"))
    stage["records_more"] = {
        str(p.relative_to(results)): _read(p) for p in results.glob("*/*.json")
    }
    stage["tables_more"] = compare.report(config)["tables"]
    return stage


def _pretrain_row(variant, runs):
    """The pre-training table's row of `variant`, computed from its runs
    here (one seed: the single values)."""
    finals = sorted(r["final_val_loss"] for r in runs)
    middle = finals[len(finals) // 2] if len(finals) % 2 else sum(finals) / 2
    cell = f"{middle:.3f}"
    if len(finals) > 1:
        cell += f" [{finals[0]:.3f}, {finals[-1]:.3f}]"
    seeds = ",".join(
        str(r["seed"]) for r in sorted(runs, key=lambda r: r["seed"])
    )
    return f"| {variant} | {seeds} | {cell} |"


@pytest.mark.large
def test_study_resumes_and_regenerates_from_results(study):
    assert study["part_way"] == ["bert__seed0.json"]
    assert study["bert_stamp_resumed"] == study["bert_stamp"]  # skipped
    assert study["out"]["pending"] == []
    assert study["pretrained"] == ["bert__seed0.json", "rope__seed0.json"]
    saved = study["records"]["pretrain/bert__seed0.json"]
    assert saved["variant"] == "bert" and saved["seed"] == 0
    assert saved["num_train_steps"] == 4
    assert saved["curve"]["steps"] == [2, 4]
    assert saved["final_val_loss"] == saved["curve"]["val_loss"][-1]
    assert set(saved["heldout_loss_by_length"]) == {str(SEQ), str(2 * SEQ)}
    # Every record names the code that made it.
    assert {r["tupe_tf_version"] for r in study["records"].values()} == {
        tupe_tf.__version__
    }
    # The fine-tuning's score: the evaluation file's after its last epoch,
    # the fine-tuning's own results, and a share of the 24 evaluation
    # sentences; its selection score, on 2 of the 24 training rows.
    tuned = study["records"][
        "finetune/bert__pseed0__sst2__lr0.001__ep1__seed0.json"
    ]
    own = study["glue_results"]["runs"][0]
    assert tuned["score"] == own["evaluation"]["validation"]["accuracy"]
    assert tuned["selection_score_per_epoch"] == [tuned["selection_score"]]
    assert tuned["selection_score"] in (0.0, 0.5, 1.0)
    assert (tuned["selection_fraction"], tuned["num_fit_examples"]) == (0.1, 22)
    assert tuned["score"] * 24 == pytest.approx(round(tuned["score"] * 24))
    control = study["records"][
        "finetune/no-pretraining__pseed0__sst2__lr0.001__ep1__seed0.json"
    ]
    tables = study["tables"]
    assert (
        f"| no-pretraining | 0.001 | {control['score']:.3f} | control |"
        in tables
    )
    assert f"| bert | 0.001 | {tuned['score']:.3f} | " in tables
    assert _pretrain_row("bert", [saved]) + " reference |" in tables
    # --from_results, without the models, rebuilds identical tables and
    # figures, and the figures plot the records.
    assert study["tables_again"] == tables
    assert study["report"]["tables"] == study["out"]["tables"]
    assert study["figures_again"] == study["figures"]
    _assert_figures_plot_the_records(study)
    planned = len(compare.plan_runs(study["config"]))
    assert (
        f"Runs finished: {planned} of {planned} planned, {planned} on" in tables
    )

    # Adding a seed to bert ran only that seed; the report keeps rope,
    # which that run did not name, and the default plan's report counts
    # the new runs as on record, not planned.
    assert study["more_out"]["pending"] == []
    assert study["pretrained_more"] == [
        "bert__seed0.json",
        "bert__seed1.json",
        "rope__seed0.json",
    ]
    assert study["bert_stamp_more"] == study["bert_stamp"]
    more = study["records_more"]
    rope = more["pretrain/rope__seed0.json"]
    assert _pretrain_row("rope", [rope]) in study["more_out"]["tables"]
    berts = [
        more["pretrain/bert__seed0.json"],
        more["pretrain/bert__seed1.json"],
    ]
    assert _pretrain_row("bert", berts) + " reference |" in study["tables_more"]
    assert (
        f"{planned} of {planned} planned, {planned + 2} on record"
        in (study["tables_more"])
    )


def _assert_figures_plot_the_records(study):
    """Each figure's lines are the records' numbers, and the PNG shows it."""
    import numpy as np

    from tests.figure_check import assert_png_shows
    from tupe_tf.analysis import study_figures

    config = study["config"]
    records = study["records"]
    pretrain = [records[f"pretrain/{v}__seed0.json"] for v in ("bert", "rope")]
    order = ["bert", "rope"]
    # The PNGs as the study wrote them then (a later stage redraws them).
    loss_png, length_png, glue_png = study["figures"].values()
    figure = study_figures.draw_loss_bands(pretrain, order)
    lines = {line.get_label(): line for line in figure.axes[0].lines}
    for run in pretrain:
        line = lines[f"{run['variant']} (n=1)"]
        np.testing.assert_allclose(line.get_xdata(), run["curve"]["steps"])
        np.testing.assert_allclose(line.get_ydata(), run["curve"]["val_loss"])
    assert_png_shows(loss_png, figure)
    figure = study_figures.draw_extrapolation(pretrain, order, SEQ)
    lines = {line.get_label(): line for line in figure.axes[0].lines}
    for run in pretrain:
        losses = run["heldout_loss_by_length"]
        lengths = sorted(losses, key=int)
        errorbar = [
            c
            for c in figure.axes[0].containers
            if c.get_label() == run["variant"]
        ]
        np.testing.assert_allclose(
            errorbar[0].lines[0].get_ydata(), [losses[n] for n in lengths]
        )
    scaled = pretrain[1]["rope_scaled_loss_by_length"]
    for scaling, losses in scaled.items():
        np.testing.assert_allclose(
            lines[f"rope + {scaling}"].get_ydata(),
            [losses[n] for n in sorted(losses, key=int)],
        )
    assert_png_shows(length_png, figure)
    glue = study_summary.glue_summary(
        config,
        [r for k, r in records.items() if k.startswith("finetune/")],
        order,
    )
    figure = study_figures.draw_glue(glue)
    points = [line for line in figure.axes[0].lines if line.get_marker() == "o"]
    tuned = records["finetune/bert__pseed0__sst2__lr0.001__ep1__seed0.json"]
    np.testing.assert_allclose(points[0].get_ydata(), [tuned["score"]])
    assert_png_shows(glue_png, figure)


@pytest.mark.large
def test_a_missing_model_is_pretrained_again_for_its_finetuning(study):
    # The fine-tuning lost on the machine without models ran again after
    # bert's pre-training ran again; the recorded pre-training is kept and
    # the new one, in rerun/, reproduces it.
    assert study["retuned"]
    assert study["bert_stamp_rerun"] == study["bert_stamp"]
    recorded = study["records"]["pretrain/bert__seed0.json"]
    rerun = study["rerun"]
    assert (rerun["variant"], rerun["seed"]) == ("bert", 0)
    assert rerun["curve"]["steps"] == recorded["curve"]["steps"]
    assert rerun["final_val_loss"] == pytest.approx(
        recorded["final_val_loss"], abs=1e-3
    )
    final = abs(rerun["final_val_loss"] - recorded["final_val_loss"])
    held = max(
        abs(rerun["heldout_loss_by_length"][n] - v)
        for n, v in recorded["heldout_loss_by_length"].items()
    )
    assert (
        f"1 pre-training run again (its model was not on the machine; "
        f"`rerun/`) reproduces its record's final validation loss to "
        f"{final:.1e} and held-out losses to {held:.1e}."
    ) in " ".join(study["findings"].split())  # wrapped lines joined


@pytest.mark.large
def test_length_free_options_are_evaluated_past_the_tables_and_extended(study):
    config = study["config"]
    assert [r.key for r in compare.plan_runs(config)][-2:] == [
        "extend/bert__seed0__steps2",
        "extend/rope__seed0__steps2",
    ]
    records = study["records"]
    short, long = str(SEQ), str(2 * SEQ)
    rows = []
    for variant in ("bert", "rope"):
        trained = records[f"pretrain/{variant}__seed0.json"]
        record = records[f"extend/{variant}__seed0__steps2.json"]
        losses = record["heldout_loss"]
        assert record["length"] == 2 * SEQ and record["trained_length"] == SEQ
        # Tokens per step kept: half the batch at twice the length.
        assert record["global_batch_size"] == 4
        assert record["curve"]["steps"] == [2]
        for length in (short, long):
            assert losses["trained"][length] == pytest.approx(
                trained["heldout_loss_by_length"][length], abs=1e-5
            )
        # Every loss of the record is its model's, evaluated again here.
        again = study["recomputed"]["extend"][variant]
        for phase in ("trained", "refilled", "extended"):
            for length, loss in losses[phase].items():
                assert loss == pytest.approx(again[phase][length], abs=1e-5)
        if variant == "rope":  # nothing bound to the length
            assert record["grown_tables"] == {}
        else:  # the input table's rows 16-31 refilled with rows 0-15
            assert list(record["grown_tables"].values()) == [[SEQ, 2 * SEQ]]
        before = losses["refilled"][long] - losses["trained"][short]
        after = losses["extended"][long] - losses["extended"][short]
        values = [
            losses["trained"][short],
            losses["trained"][long],
            losses["refilled"][long],
            losses["extended"][long],
            losses["extended"][short],
        ]
        rows.append(
            f"| {variant} | 2 | 0 | - | "
            + " | ".join(f"{v:.3f}" for v in values)
            + f" | {before:+.3f} | {after:+.3f} | "
            # The paired change of one seed: p 1 (no `nope` to compare).
            + f"{after - before:+.3f}, n 1, p 1, Holm 1 |"
        )
    tables = study["tables"]
    assert f"Context extension {short} -> {long}" in tables
    for row in rows:
        assert row in tables
    with pytest.raises(UserError, match="extension_train_files"):
        config.replace(extension_train_files=None).validate()

    # Length-free options past the tables; rope with each scaling.
    rope = records["pretrain/rope__seed0.json"]
    bert = records["pretrain/bert__seed0.json"]
    lengths = [str(SEQ), str(2 * SEQ), str(4 * SEQ)]
    assert sorted(rope["heldout_loss_by_length"], key=int) == lengths
    assert sorted(bert["heldout_loss_by_length"], key=int) == lengths[:2]
    scaled = rope["rope_scaled_loss_by_length"]
    for scaling, losses in study["recomputed"]["scaled"].items():
        assert scaled[scaling] == pytest.approx(losses, abs=1e-5)
    assert f"length {4 * SEQ} (past the tables)" in tables
    yarn = scaled["yarn"]
    assert (
        f"| rope + yarn | as rope | {yarn[str(2 * SEQ)]:.3f} | "
        f"{yarn[str(4 * SEQ)]:.3f} |"
    ) in tables

    # The old record was completed from its model, not pre-trained again;
    # without its model, it was pre-trained again.
    completed = study["completed"]
    assert completed["curve"] == rope["curve"]
    assert completed["wall_seconds"] == rope["wall_seconds"]
    assert completed["heldout_loss_by_length"] == rope["heldout_loss_by_length"]
    assert completed["rope_scaled_loss_by_length"] == scaled
    again = study["rope_again"]
    assert str(4 * SEQ) in again["heldout_loss_by_length"]
    assert again["wall_seconds"] != rope["wall_seconds"]

    # The seed added later was extended too: the table gives the gaps'
    # spread over both seeds.
    more = study["records_more"]
    assert study["extended_more"] == [
        "bert__seed0__steps2.json",
        "bert__seed1__steps2.json",
        "rope__seed0__steps2.json",
    ]
    gaps = []
    for seed in (0, 1):
        losses = more[f"extend/bert__seed{seed}__steps2.json"]["heldout_loss"]
        gaps.append(
            (
                losses["refilled"][long] - losses["trained"][short],
                losses["extended"][long] - losses["extended"][short],
            )
        )
    before = sorted(b for b, _ in gaps)
    after = sorted(a for _, a in gaps)
    spread = "{:+.3f} [{:+.3f}, {:+.3f}]"
    assert (
        " | "
        + spread.format(sum(before) / 2, *before)
        + " | "
        + spread.format(sum(after) / 2, *after)
        + " |"
    ) in study["tables_more"]
    assert "| bert | 2 | 0,1 | - |" in study["tables_more"]


@pytest.mark.large
def test_runs_on_other_data_are_refused(study, tiny_data, tmp_path):
    results = study["results"]
    before = sorted(str(p) for p in results.glob("*/*.json"))
    other = tmp_path / "other_vocab.txt"
    other.write_text(open(tiny_data["vocab"]).read() + "zzzextra\n")
    # A seed to add, on changed data.
    changed = study["config"].replace(
        seeds=[0, 2], pretrain=dict(vocab_file=str(other))
    )
    with pytest.raises(UserError, match="data changed"):
        compare.run_comparison(changed)
    # Nothing was trained on the changed data.
    assert sorted(str(p) for p in results.glob("*/*.json")) == before
