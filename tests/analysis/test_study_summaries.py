"""The study's statistics, GLUE tables and extension findings, computed
from hand-written records."""

import pytest

from tupe_tf.analysis import compare
from tupe_tf.analysis import study_report
from tupe_tf.analysis import study_stats
from tupe_tf.analysis import study_summary
from tupe_tf.analysis.study_config import CONTROL


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
    rows = study_summary.glue_summary(config, finetune, ["bert"])["sst2"]
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
    rows = study_summary.glue_summary(config, finetune, ["bert"])["sst2"]
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


def _extension_record(variant, seed, trained, refilled, extended):
    """An extension record with held-out losses (64, 256) as trained and
    extended, and at 256 refilled."""
    return {
        "variant": variant,
        "seed": seed,
        "num_train_steps": 500,
        "heldout_loss": {
            "trained": {"64": trained[0], "256": trained[1]},
            "refilled": {"256": refilled},
            "extended": {"64": extended[0], "256": extended[1]},
        },
    }


def _pretraining_record(variant, seed, final):
    return {
        "variant": variant,
        "seed": seed,
        "curve": {"steps": [100, 200], "val_loss": [6.0, final]},
        "final_val_loss": final,
        "heldout_loss_by_length": {},
    }


def test_extension_gaps_are_spread_over_seeds_and_plateau_seeds_flagged():
    from tupe_tf.analysis import study_extension
    from tupe_tf.analysis import study_findings

    config = compare.CompareConfig()
    # tupe-a: seed 0 never left the plateau (5.6 > 5.4) and keeps its gap
    # (+0.125 -> +0.125); seed 1 left it and narrows (+0.5 -> +0.25).
    # nope: +0.0625 -> +0.03125 at both seeds.
    extensions = [
        _extension_record("tupe-a", 0, (6.5, 6.6), 6.625, (6.25, 6.375)),
        _extension_record("tupe-a", 1, (6.0, 6.6), 6.5, (5.75, 6.0)),
        _extension_record("nope", 0, (6.5, 6.6), 6.5625, (6.4375, 6.46875)),
        _extension_record("nope", 1, (6.5, 6.6), 6.5625, (6.4375, 6.46875)),
    ]
    pretrain = [
        _pretraining_record("tupe-a", 0, 5.6),
        _pretraining_record("tupe-a", 1, 5.2),
        _pretraining_record("nope", 0, 5.8),
        _pretraining_record("nope", 1, 5.8),
    ]
    order = ["tupe-a", "nope"]
    table = study_extension.render_table(config, extensions, pretrain, order)
    assert (
        "| tupe-a | 500 | 0,1 | 0 | 6.250 [6.000, 6.500] | 6.600 [6.600, 6.600] | "
        "6.562 [6.500, 6.625] | 6.188 [6.000, 6.375] | 6.000 [5.750, 6.250] | "
        "+0.312 [+0.125, +0.500] | +0.188 [+0.125, +0.250] |"
    ) in table
    assert "| nope | 500 | 0,1 | 0,1 | 6.500 [6.500, 6.500] | " in table
    text = study_findings.Findings(
        config, pretrain, [], extensions, [], order
    ).extension()
    assert "(`extend/`, 2 seeds each)" in text
    assert "`nope` (no positions) +0.062 [+0.062, +0.062] -> +0.031 [" in text
    assert (
        "narrowed in some seeds: `tupe-a` +0.312 [+0.125, +0.500] -> "
        "+0.188 [+0.125, +0.250]"
    ) in text
    assert "pre-training left the plateau: `tupe-a` 1; every other" in text
    # One seed of nope: each variant says how many seeds its gap rests on.
    text = study_findings.Findings(
        config, pretrain, [], extensions[:3], [], order
    ).extension()
    assert "(`extend/`, 1-2 seeds per variant" in text
    assert "`nope` (1 seed) (no positions) +0.062 -> +0.031" in text
    assert "`tupe-a` (2 seeds) +0.312 [+0.125, +0.500] -> " in text
