"""The study's statistics, GLUE tables and extension findings, computed
from hand-written records."""

import pytest

from tests.analysis.fake_records import pretraining_record
from tupe_tf.analysis import compare
from tupe_tf.analysis import study_report
from tupe_tf.analysis import study_stats
from tupe_tf.analysis import study_summary
from tupe_tf.analysis.study_config import CONTROL


def _curve_record(variant, seed, losses):
    return {
        "variant": variant,
        "seed": seed,
        "curve": {"steps": [100, 200, 300], "val_loss": losses},
        "final_val_loss": losses[-1],
        "heldout_loss_by_length": {},
    }


def test_pretraining_is_compared_by_seed_with_bert_and_nope():
    assert study_stats.step_spread([100, None, 300], 400)["text"] == (
        "300 [100, >400]"
    )
    config = compare.CompareConfig()
    # rope is below nope in every seed from step 200: by 0.1, 0.2, 0.3 at
    # step 200, by 0.30, 0.26, 0.37 at step 300.
    pretrain = (
        [
            _curve_record("nope", seed, [6.0, 5.8, 5.8 + seed / 100])
            for seed in range(3)
        ]
        + [_curve_record("bert", seed, [6.0, 5.8, 5.9]) for seed in range(3)]
        + [
            _curve_record("rope", seed, [6.0, 5.7 - seed / 10, final])
            for seed, final in enumerate([5.5, 5.55, 5.45])
        ]
    )
    order = ["bert", "rope", "nope"]
    summary = study_summary.pretrain_summary(config, pretrain, order)
    rope = summary["rope"]["versus"]
    # -0.30, -0.26, -0.37: t = -9.64 on 2 degrees of freedom.
    assert rope["nope"].n == 3
    assert rope["nope"].p == pytest.approx(0.0106, abs=1e-4)
    assert (rope["nope"].low, rope["nope"].high) == pytest.approx(
        (-0.37, -0.26)
    )
    # Holm over the two variants compared with bert: nope's p 0.0041 (0.08,
    # 0.09, 0.10 below bert) x 2 = 0.0082, and rope's 0.0052 x 1 raised to
    # it.
    assert rope["bert"].p == pytest.approx(0.0052, abs=1e-4)
    assert rope["bert"].p_holm == pytest.approx(0.0082, abs=1e-4)
    assert rope["bert"].different
    assert summary["nope"]["versus"]["nope"] is None
    # On three seeds rope is below nope by the rule from step 300: at step
    # 200, -0.1, -0.2, -0.3 give p 0.074. bert equals nope at step 200 at
    # every seed (p 1) and is above it at step 300.
    assert study_summary.first_steps_below(pretrain, order) == {
        "bert": None,
        "rope": 300,
    }
    # Six seeds call step 200's differences (p 0.0028 alone).
    six = pretrain + [
        _curve_record(r["variant"], r["seed"] + 3, r["curve"]["val_loss"])
        for r in pretrain
    ]
    assert study_summary.first_steps_below(six, ["rope"]) == {"rope": 200}
    table = study_report.render_tables(config, pretrain, [], order)
    assert (
        "| rope | 0,1,2 | 5.500 [5.450, 5.550] | -0.400 [-0.450, -0.350], n 3, "
        "p 0.0052, Holm 0.0082 (different) | -0.310 [-0.370, -0.260], n 3, "
        "p 0.011, Holm 0.011 (different) |"
    ) in table


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
        # Paired by fine-tuning seed with the control's 0.79, 0.80, 0.81:
        # -0.09, -0.08, -0.08, t = -25 on 2 degrees of freedom.
        "| bert | 0.001 | 0.720 [0.700, 0.730] | -0.083 [-0.090, -0.080], n 3, "
        "p 0.0016, Holm 0.0016 (different) | 0.0003: 0.700, 0.001: 0.720 |"
        in table
    )
    # With one configured rate the per-rate column is left out.
    config.finetune.learning_rates = [1e-3]
    table = study_report.render_tables(config, [], finetune, ["bert"])
    # Against the control's 0.70, 0.78, 0.79: 0, -0.06, -0.06, t = -2.0 on
    # 2 degrees of freedom.
    assert (
        "| bert | 0.001 | 0.720 [0.700, 0.730] | -0.040 [-0.060, +0.000], n 3, "
        "p 0.18, Holm 0.18 |"
    ) in table
    config.glue_pretrain_seeds = [0, 1]
    rows = study_summary.glue_summary(config, finetune, ["bert"])["sst2"]
    assert rows["bert"]["score"]["median"] == pytest.approx(0.815)
    assert rows["bert"]["runs"] == 6
    table = study_report.render_tables(config, [], finetune, ["bert"])
    assert (
        # Per fine-tuning seed the mean of the two models: 0.80, 0.815,
        # 0.825; minus the control's: +0.10, +0.035, +0.035.
        "| bert | 0.001 | 0.815 [0.700, 0.920] | +0.057 [+0.035, +0.100], n 3, "
        "p 0.12, Holm 0.12 | 0,1 (6) |" in table
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


def test_extension_gaps_are_spread_over_seeds_and_compared_by_seed():
    from tupe_tf.analysis import study_extension
    from tupe_tf.analysis import study_findings

    config = compare.CompareConfig()
    # tupe-a: seed 0 keeps its gap (+0.125 -> +0.125), seed 1 narrows it
    # (+0.5 -> +0.25); nope: +0.0625 -> +0.03125 at both seeds.
    extensions = [
        _extension_record("tupe-a", 0, (6.5, 6.6), 6.625, (6.25, 6.375)),
        _extension_record("tupe-a", 1, (6.0, 6.6), 6.5, (5.75, 6.0)),
        _extension_record("nope", 0, (6.5, 6.6), 6.5625, (6.4375, 6.46875)),
        _extension_record("nope", 1, (6.5, 6.6), 6.5625, (6.4375, 6.46875)),
    ]
    # tupe-a's pre-training ends 0.2 and 0.6 below nope's.
    pretrain = [
        pretraining_record("tupe-a", 0, 5.6),
        pretraining_record("tupe-a", 1, 5.2),
        pretraining_record("nope", 0, 5.8),
        pretraining_record("nope", 1, 5.8),
    ]
    order = ["tupe-a", "nope"]
    table = study_extension.render_table(config, extensions, pretrain, order)
    # The change -0 and -0.25: t = -1 on 1 degree of freedom, p 0.5;
    # nope's -0.031 at both seeds has no spread: p 0 (the rule's choice for
    # identical non-zero differences), which Holm keeps at 0, and tupe-a's
    # 0.5 x 1.
    assert (
        "| tupe-a | 500 | 0,1 | -0.400 [-0.600, -0.200] | 6.250 [6.000, 6.500] | "
        "6.600 [6.600, 6.600] | 6.562 [6.500, 6.625] | 6.188 [6.000, 6.375] | "
        "6.000 [5.750, 6.250] | +0.312 [+0.125, +0.500] | "
        "+0.188 [+0.125, +0.250] | -0.125 [-0.250, +0.000], n 2, p 0.5, "
        "Holm 0.5 |"
    ) in table
    assert "| nope | 500 | 0,1 | - | 6.500 [6.500, 6.500] | " in table
    assert "-0.031 [-0.031, -0.031], n 2, p 0, Holm 0 (different) |" in table
    text = study_findings.Findings(
        config, pretrain, [], extensions, [], order
    ).extension()
    assert (
        "(`extend/`, 2 seeds each): the gap, loss at 256 minus at 64, after "
        "the second phase minus before it at the same seed: `tupe-a` -0.125 "
        "[-0.250, +0.000], `nope` -0.031 [-0.031, -0.031]; different by the "
        "rule: `nope` of 2."
    ) in text
    # One seed of nope: each variant says how many seeds its gap rests on.
    text = study_findings.Findings(
        config, pretrain, [], extensions[:3], [], order
    ).extension()
    assert "(`extend/`, 1-2 seeds per variant" in text
    assert (
        "`tupe-a` (2 seeds) -0.125 [-0.250, +0.000], `nope` (1 seed) -0.031;"
        in text
    )
