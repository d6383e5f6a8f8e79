"""The comparison study at a micro scale: real shards, real training."""

import json
import os
from pathlib import Path

import matplotlib.image
import pytest

from tupe_tf.analysis import compare
from tupe_tf.analysis import study_records
from tupe_tf.analysis import study_report
from tupe_tf.analysis import study_stats
from tupe_tf.analysis.study_config import CONTROL
from tupe_tf.analysis.study_config import VARIANTS
from tupe_tf.utils.errors import UserError

SEQ = 16


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory):
    import data_pipeline

    root = tmp_path_factory.mktemp("compare_data")
    corpus = root / "corpus.txt"
    with open(data_pipeline.embedded_corpus_path()) as f:
        corpus.write_text(f.read(30_000))
    vocab = str(root / "vocab.txt")
    data_pipeline.build_vocabulary(str(corpus), 300, vocab, lowercase=True)

    def shards(length, num_shards):
        directory = root / f"shards_{length}"
        data_pipeline.build_shards(
            data_pipeline.ShardConfig(
                input_patterns=str(corpus),
                vocab_file=vocab,
                output_dir=str(directory),
                max_seq_length=length,
                num_shards=num_shards,
                lowercase=True,
            )
        )
        return sorted(
            str(directory / f)
            for f in os.listdir(directory)
            if f.endswith(".tfrecord")
        )

    train = shards(SEQ, 2)
    glue = root / "glue"
    (glue / "SST-2").mkdir(parents=True)
    rows = ["sentence\tlabel"] + [
        f"{'a good fine film' if i % 2 else 'a bad dull movie'} {i}\t{i % 2}"
        for i in range(24)
    ]
    for split in ("train", "dev"):
        (glue / "SST-2" / f"{split}.tsv").write_text("\n".join(rows) + "\n")
    return {
        "train": train[:1],
        "eval": {
            SEQ: train[1:],
            2 * SEQ: shards(2 * SEQ, 1),
            4 * SEQ: shards(4 * SEQ, 1),
        },
        "vocab": vocab,
        "glue": str(glue),
    }


def _config(tmp_path, data, **changes):
    """The micro study; `changes` as `CompareConfig.replace` takes them."""
    config = compare.CompareConfig().replace(
        results_dir=str(tmp_path / "results"),
        figures_dir=str(tmp_path / "figures"),
        output_dir=str(tmp_path / "runs"),
        variants=["bert", "tupe-r"],
        seeds=[0, 1],
        other_seeds=[0],
        extrapolation_factors=[2],
        beyond_table_factors=[4],
        eval_interval=2,
        glue_tasks=["sst2"],
        eval_files=data["eval"],
        pretrain=dict(
            seq_length=SEQ,
            global_batch_size=8,
            num_train_steps=4,
            eval_steps=2,
            train_files=data["train"],
            vocab_file=data["vocab"],
            model=dict(
                num_layers=2, num_heads=2, hidden_dim=32, intermediate_dim=64
            ),
            # XLA's compile time outweighs 4 steps; the first test keeps the
            # study's default (XLA) to cover it.
            runtime=dict(jit_compile=False),
        ),
        finetune=dict(
            glue_dir=data["glue"], seeds=[0], num_epochs=1, seq_length=16
        ),
    )
    return config.replace(**changes)


XLA = dict(pretrain=dict(runtime=dict(jit_compile=True)))
NO_GLUE = dict(finetune=dict(glue_dir=None))


@pytest.mark.large
def test_study_resumes_and_regenerates_from_results(tmp_path, tiny_data):
    # One seed per variant (each XLA pre-training costs the suite time);
    # the second seed comes with the extension below.
    config = _config(tmp_path, tiny_data, seeds=[0], **XLA)
    # Stop part-way, as an interrupted study would: the control's
    # fine-tuning and bert's seed-0 pre-training are done.
    compare.run_comparison(config, max_runs=2)
    results = tmp_path / "results" / config.name
    first = results / "pretrain" / "bert__seed0.json"
    assert sorted(os.listdir(results / "pretrain")) == ["bert__seed0.json"]
    stamp = first.stat().st_mtime_ns
    out = compare.run_comparison(config)
    assert first.stat().st_mtime_ns == stamp  # finished runs are skipped
    assert out["pending"] == []
    assert sorted(os.listdir(results / "pretrain")) == [
        "bert__seed0.json",
        "tupe-r__seed0.json",
    ]
    saved = json.loads(
        (results / "pretrain" / "tupe-r__seed0.json").read_text()
    )
    assert saved["variant"] == "tupe-r" and saved["seed"] == 0
    assert saved["num_train_steps"] == 4
    assert saved["curve"]["steps"] == [2, 4]
    assert set(saved["heldout_loss_by_length"]) == {str(SEQ), str(2 * SEQ)}
    tuned = json.loads(
        (
            results
            / "finetune"
            / "tupe-r__pseed0__sst2__lr0.001__ep1__seed0.json"
        ).read_text()
    )
    assert 0.0 <= tuned["score"] <= 1.0

    tables = (results / "tables.md").read_text()
    assert "| no-pretraining | 0.001 |" in tables  # the control row
    assert "| tupe-r | 0 |" in tables
    # A rerun does nothing new; --from_results rebuilds identical tables
    # without the models.
    figures = {p: open(p, "rb").read() for p in out["figures"]}
    import shutil

    shutil.rmtree(tmp_path / "runs")
    os.remove(results / "tables.md")
    again = compare.report(config)
    assert (results / "tables.md").read_text() == tables
    assert again["tables"] == out["tables"]
    for path, data in figures.items():
        assert open(path, "rb").read() == data
        assert matplotlib.image.imread(path).shape[0] > 100
    planned = len(compare.plan_runs(config))
    assert f"Runs finished: {planned} of {planned} planned, {planned} on" in (
        tables
    )

    # Extending one variant with a seed runs only that seed; the default
    # plan's report then shows it and counts it as on record, not planned.
    extended = _config(
        tmp_path,
        tiny_data,
        variants=["tupe-r"],
        seeds=[0, 1],
        pretrain=XLA["pretrain"],
        finetune=NO_GLUE["finetune"],
    )
    extended_out = compare.run_comparison(extended)
    assert extended_out["pending"] == []
    # Its own report keeps the variant it did not name.
    assert "| bert | 0 |" in extended_out["tables"]
    assert sorted(os.listdir(results / "pretrain"))[-1] == "tupe-r__seed1.json"
    assert first.stat().st_mtime_ns == stamp
    tables = compare.report(config)["tables"]
    assert "| tupe-r | 0,1 |" in tables
    assert f"{planned} of {planned} planned, {planned + 1} on record" in tables


def test_plan_runs_the_core_variants_first_each_fine_tuned_at_once(
    tmp_path, tiny_data
):
    config = _config(
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
    config = _config(
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
    config = _config(
        tmp_path, tiny_data, variants=["bert", "tupe-a", "diet-rel"]
    )
    tuned = {
        run.variant
        for run in compare.plan_runs(config)
        if run.kind != "pretrain"
    }
    assert tuned == {CONTROL, "bert", "diet-rel"}


@pytest.mark.large
def test_a_missing_model_is_pretrained_again_for_its_finetuning(
    tmp_path, tiny_data
):
    import shutil

    config = _config(tmp_path, tiny_data, variants=["bert"], seeds=[0])
    # The control's fine-tuning and bert's pre-training, as a session that
    # stopped there; then a new machine without the models.
    compare.run_comparison(config, max_runs=2)
    results = tmp_path / "results" / config.name
    pretrained = results / "pretrain" / "bert__seed0.json"
    stamp = pretrained.stat().st_mtime_ns
    shutil.rmtree(tmp_path / "runs")
    out = compare.run_comparison(config)
    assert out["pending"] == []
    assert pretrained.stat().st_mtime_ns != stamp  # pre-trained again
    assert (
        results / "finetune" / "bert__pseed0__sst2__lr0.001__ep1__seed0.json"
    ).is_file()


def _assert_extended_to_the_tables_length(config):
    """The extension runs of a study of rope and bert (`extension_steps=2`):
    last in the plan, in the variants' order."""
    assert [r.key for r in compare.plan_runs(config)][-2:] == [
        "extend/rope__seed0__steps2",
        "extend/bert__seed0__steps2",
    ]
    results = Path(config.study_results_dir)
    short, long = str(SEQ), str(2 * SEQ)
    for variant in ("bert", "rope"):
        trained = json.loads(
            (results / "pretrain" / f"{variant}__seed0.json").read_text()
        )
        record = json.loads(
            (results / "extend" / f"{variant}__seed0__steps2.json").read_text()
        )
        losses = record["heldout_loss"]
        assert record["length"] == 2 * SEQ and record["trained_length"] == SEQ
        # Tokens per step kept: half the batch at twice the length.
        assert record["global_batch_size"] == 4
        assert record["curve"]["steps"] == [2]
        for length in (short, long):
            assert losses["trained"][length] == pytest.approx(
                trained["heldout_loss_by_length"][length], abs=1e-5
            )
        assert losses["extended"][long] != losses["trained"][long]
        if variant == "rope":  # nothing bound to the length
            assert record["grown_tables"] == {}
            assert losses["refilled"][long] == pytest.approx(
                losses["trained"][long], abs=1e-6
            )
        else:  # the input table's rows 16-31 refilled with rows 0-15
            assert list(record["grown_tables"].values()) == [[SEQ, 2 * SEQ]]
            assert losses["refilled"][long] != losses["trained"][long]
    tables = (results / "tables.md").read_text()
    assert f"Context extension {short} -> {long}" in tables
    assert "| rope | 2 |" in tables
    with pytest.raises(UserError, match="extension_train_files"):
        config.replace(extension_train_files=None).validate()


@pytest.mark.large
def test_length_free_options_are_evaluated_past_the_tables_and_extended(
    tmp_path, tiny_data
):
    import shutil

    # The same study extends each model to the tables' length (one study
    # for both: each pre-training costs the suite time).
    config = _config(
        tmp_path,
        tiny_data,
        variants=["rope", "bert"],
        seeds=[0],
        extension_steps=2,
        extension_train_files=tiny_data["eval"][2 * SEQ],
        **NO_GLUE,
    )
    compare.run_comparison(config)
    _assert_extended_to_the_tables_length(config)
    results = tmp_path / "results" / config.name / "pretrain"
    rope = json.loads((results / "rope__seed0.json").read_text())
    bert = json.loads((results / "bert__seed0.json").read_text())
    lengths = [str(SEQ), str(2 * SEQ), str(4 * SEQ)]
    assert sorted(rope["heldout_loss_by_length"], key=int) == lengths
    assert sorted(bert["heldout_loss_by_length"], key=int) == lengths[:2]
    scaled = rope["rope_scaled_loss_by_length"]
    assert sorted(scaled) == ["linear", "ntk", "yarn"]
    for losses in scaled.values():
        assert sorted(losses, key=int) == lengths[1:]
        # A scaling changes the model's positions past the training length.
        assert (
            losses[str(4 * SEQ)] != rope["heldout_loss_by_length"][str(4 * SEQ)]
        )
    tables = (results.parent / "tables.md").read_text()
    assert f"length {4 * SEQ} (past the tables)" in tables
    assert "| rope + yarn | as rope |" in tables

    # A record from before the beyond-table lengths gets them from its
    # model, without pre-training again.
    old = dict(
        rope, heldout_loss_by_length=dict(rope["heldout_loss_by_length"])
    )
    del old["heldout_loss_by_length"][str(4 * SEQ)]
    del old["rope_scaled_loss_by_length"]
    study_records.write_json(str(results / "rope__seed0.json"), old)
    compare.run_comparison(config)
    again = json.loads((results / "rope__seed0.json").read_text())
    assert again["curve"] == rope["curve"]
    assert again["wall_seconds"] == rope["wall_seconds"]
    assert again["heldout_loss_by_length"] == rope["heldout_loss_by_length"]
    assert again["rope_scaled_loss_by_length"] == scaled
    # Without its model, the run is pre-trained again.
    study_records.write_json(str(results / "rope__seed0.json"), old)
    shutil.rmtree(tmp_path / "runs")
    compare.run_comparison(config)
    again = json.loads((results / "rope__seed0.json").read_text())
    assert str(4 * SEQ) in again["heldout_loss_by_length"]
    assert again["wall_seconds"] != rope["wall_seconds"]


@pytest.mark.large
def test_runs_on_other_data_are_refused(tmp_path, tiny_data):
    config = _config(tmp_path, tiny_data, variants=["bert"], seeds=[0])
    compare.run_comparison(config, max_runs=1)
    other = tmp_path / "other_vocab.txt"
    other.write_text(open(tiny_data["vocab"]).read() + "zzzextra\n")
    changed = _config(
        tmp_path,
        tiny_data,
        variants=["bert"],
        seeds=[0],
        pretrain=dict(vocab_file=str(other)),
    )
    with pytest.raises(UserError, match="data changed"):
        compare.run_comparison(changed)
    # Nothing was trained on the changed data.
    assert os.listdir(tmp_path / "results" / config.name / "finetune") == [
        "no-pretraining__pseed0__sst2__lr0.001__ep1__seed0.json"
    ]


def test_variants_come_from_the_option_table():
    from tupe_tf.utils.backbone_options import POSITION_ENCODINGS

    assert list(VARIANTS)[: len(POSITION_ENCODINGS)] == list(POSITION_ENCODINGS)
    assert VARIANTS["tupe-a-tie-cls"] == {
        "position_encoding": "tupe-a",
        "untie_cls": False,
    }


def test_changed_settings_are_refused(tmp_path, tiny_data):
    study_records.check_study_settings(_config(tmp_path, tiny_data))
    with pytest.raises(UserError, match="learning_rate"):
        study_records.check_study_settings(
            _config(
                tmp_path,
                tiny_data,
                pretrain=dict(optimizer=dict(learning_rate=3e-3)),
            )
        )
    # Fine-tuning results of another recipe would silently drop out of the
    # GLUE table: refused too.
    with pytest.raises(UserError, match="glue_recipe"):
        study_records.check_study_settings(_config(tmp_path, tiny_data, **XLA))


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


def test_stats_say_no_difference_when_intervals_overlap():
    a = study_stats.spread([5.0, 5.2, 5.4])
    b = study_stats.spread([5.3, 5.5, 5.6])
    c = study_stats.spread([4.0, 4.1, 4.2])
    assert study_stats.compare_to(a, b, True) == "no difference"
    assert study_stats.compare_to(c, b, True) == "better"
    assert study_stats.compare_to(b, c, True) == "worse"
    # One seed has no interval: no "better" or "worse", only which is lower.
    one = study_stats.spread([5.0])
    assert (
        study_stats.compare_to(one, b, True) == "lower (1 seed: no conclusion)"
    )
    assert study_stats.compare_to(b, one, True) == (
        "higher (1 seed: no conclusion)"
    )
    assert study_stats.step_spread([100, None, 300], 400)["text"] == (
        "300 [100, >400]"
    )
    assert study_stats.plateau_exit_step([1, 2, 3], [6.0, 5.5, 5.3], 5.7) == 3


def test_glue_selection_takes_the_best_median_rate_and_shows_each():
    config = compare.CompareConfig(glue_tasks=["sst2"]).replace(
        finetune=dict(seeds=[0, 1, 2], learning_rates=[3e-4, 1e-3])
    )

    def runs(variant, learning_rate, scores, pretrain_seed=0):
        return [
            dict(
                variant=variant,
                task="sst2",
                recipe=config.glue_recipe(),
                learning_rate=learning_rate,
                pretrain_seed=pretrain_seed,
                seed=seed,
                metric="accuracy",
                score=score,
            )
            for seed, score in enumerate(scores)
        ]

    finetune = (
        runs(CONTROL, 3e-4, [0.79, 0.80, 0.81])
        + runs(CONTROL, 1e-3, [0.70, 0.78, 0.79])
        + runs("bert", 3e-4, [0.60, 0.70, 0.75])
        + runs("bert", 1e-3, [0.70, 0.72, 0.73])
        # A rate outside the configured sweep is ignored, however good.
        + runs("bert", 3e-3, [0.99, 0.99, 0.99])
        # Another pre-training seed's model: pooled only when listed.
        + runs("bert", 1e-3, [0.90, 0.91, 0.92], pretrain_seed=1)
    )
    rows = study_report.glue_summary(config, finetune, ["bert"])["sst2"]
    assert rows[CONTROL]["learning_rate"] == 3e-4
    assert rows["bert"]["learning_rate"] == 1e-3
    assert rows["bert"]["median_by_rate"] == {3e-4: 0.70, 1e-3: 0.72}
    table = study_report.render_tables(config, [], finetune, ["bert"])
    assert (
        "| bert | 0.001 | 0.720 [0.700, 0.730] | worse | 0.0003: 0.700, 0.001: 0.720 |"
        in table
    )
    # With one configured rate the per-rate column is left out.
    config.finetune.learning_rates = [1e-3]
    table = study_report.render_tables(config, [], finetune, ["bert"])
    assert "| bert | 0.001 | 0.720 [0.700, 0.730] | no difference |" in table
    config.glue_pretrain_seeds = [0, 1]
    rows = study_report.glue_summary(config, finetune, ["bert"])["sst2"]
    assert rows["bert"]["score"]["median"] == pytest.approx(0.815)
    assert rows["bert"]["runs"] == 6
    table = study_report.render_tables(config, [], finetune, ["bert"])
    assert (
        "| bert | 0.001 | 0.815 [0.700, 0.920] | no difference | 0,1 (6) |"
        in table
    )
    assert (
        "| no-pretraining | 0.001 | 0.780 [0.700, 0.790] | control | - (3) |"
        in table
    )


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
