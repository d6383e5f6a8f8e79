"""Summaries of the study's records: spreads over seeds per variant, and
the paired comparisons of `paired_stats` (each variant's final loss against
`bert`'s and `nope`'s, each GLUE row against the control's).

The numbers the tables (`study_report`) and the findings
(`study_findings`) are written from, computed once from the per-run JSON
files.

Example:

>>> from tupe_tf.analysis.study_config import CompareConfig
>>> pretrain_summary(CompareConfig(), [], ["bert"])
{}
"""

from tupe_tf.analysis import paired_stats
from tupe_tf.analysis import study_stats
from tupe_tf.analysis.study_config import CONTROL
from tupe_tf.analysis.study_config import NO_POSITIONS
from tupe_tf.analysis.study_config import REFERENCE

# The variants each pre-trained variant's final loss is paired with: the
# reference, and the bag-of-words level (`nope`: without positions every
# [MASK] of a sequence gets one prediction).
BASELINES = (REFERENCE, NO_POSITIONS)


def _by_variant(runs, order):
    grouped = {v: [] for v in order}
    for run in runs:
        if run["variant"] in grouped:
            grouped[run["variant"]].append(run)
    return grouped


def _variant_summary(config, runs, bert_final):
    """Spreads over one variant's pre-training seeds."""
    curves = [r["curve"] for r in runs]
    return {
        "seeds": sorted(r["seed"] for r in runs),
        "final": study_stats.spread([r["final_val_loss"] for r in runs]),
        "reach_bert": study_stats.step_spread(
            [
                study_stats.first_step_at_or_below(
                    c["steps"], c["val_loss"], bert_final
                )
                for c in curves
            ],
            config.pretrain.num_train_steps,
        ),
        "final_by_seed": {r["seed"]: r["final_val_loss"] for r in runs},
        "by_length": {
            length: study_stats.spread(
                [r["heldout_loss_by_length"].get(str(length)) for r in runs]
            )
            for length in all_lengths(config)
        },
    }


def all_lengths(config):
    """Every held-out length: the tables' and past them."""
    return config.eval_lengths + config.beyond_table_lengths


def pretrain_summary(config, pretrain, order):
    """Per variant: spreads over seeds of the study's figures."""
    grouped = _by_variant(pretrain, order)
    reference = grouped.get(REFERENCE, [])
    bert_final = study_stats.spread([r["final_val_loss"] for r in reference])[
        "median"
    ]
    summary = {
        variant: _variant_summary(config, runs, bert_final)
        for variant, runs in grouped.items()
        if runs
    }
    for baseline in BASELINES:
        versus = paired_stats.decide(
            {
                v: paired_stats.paired(
                    s["final_by_seed"], summary[baseline]["final_by_seed"]
                )
                for v, s in summary.items()
                if v != baseline and baseline in summary
            }
        )
        for variant, s in summary.items():
            s.setdefault("versus", {})[baseline] = versus.get(variant)
    return summary


def first_steps_below(pretrain, order, baseline=NO_POSITIONS):
    """`{variant: step}`: the first evaluated step at which a variant's
    validation loss is below `baseline`'s by the rule (`paired_stats`, Holm
    over the variants at that step), None if at none."""
    curves = {}
    for run in pretrain:
        losses = dict(zip(run["curve"]["steps"], run["curve"]["val_loss"]))
        curves.setdefault(run["variant"], {})[run["seed"]] = losses
    base = curves.get(baseline, {})
    steps = sorted({step for losses in base.values() for step in losses})
    first = {v: None for v in order if v in curves and v != baseline}
    for step in steps:
        family = paired_stats.decide(
            {
                v: paired_stats.paired(
                    {s: c.get(step) for s, c in curves[v].items()},
                    {s: c.get(step) for s, c in base.items()},
                )
                for v in first
            }
        )
        for v, c in family.items():
            if first[v] is None and c and c.different and c.mean < 0:
                first[v] = step
    return first


def _glue_runs(config, finetune, task, variant):
    """The fine-tuning runs of one GLUE row under the configured sweep."""
    recipe = config.glue_recipe()
    return [
        r
        for r in finetune
        if r["variant"] == variant
        and r["task"] == task
        and r["recipe"] == recipe
        and r["learning_rate"] in config.finetune.learning_rates
        and r["seed"] in config.finetune.seeds
        and (
            variant == CONTROL
            or r["pretrain_seed"] in config.fine_tuned_pretrain_seeds
        )
    ]


def _glue_row(variant, runs):
    """One GLUE row: the chosen learning rate's spread.

    The rate is chosen by the median `selection_score` (the selection
    split carved from the training file); records from before selection
    splits have none and are chosen by their median `score`, the reported
    evaluation split itself (`chosen_on` says which; `None`: one rate, no
    choice).
    """
    by_lr = {}
    for r in runs:
        by_lr.setdefault(r["learning_rate"], []).append(r["score"])
    spreads = {lr: study_stats.spread(v) for lr, v in by_lr.items()}
    on_selection = all("selection_score" in r for r in runs)
    key = "selection_score" if on_selection else "score"
    choice = {
        lr: study_stats.spread(
            [r[key] for r in runs if r["learning_rate"] == lr]
        )["median"]
        for lr in by_lr
    }
    best = max(sorted(choice), key=lambda lr: choice[lr])
    chosen_on = "selection" if on_selection else "evaluation"
    return {
        "metric": runs[0]["metric"],
        "learning_rate": best,
        "chosen_on": chosen_on if len(by_lr) > 1 else None,
        "score": spreads[best],
        "runs": len(by_lr[best]),
        # The control is not pre-trained: no seeds to list.
        "pretrain_seeds": []
        if variant == CONTROL
        else sorted(
            {r["pretrain_seed"] for r in runs if r["learning_rate"] == best}
        ),
        "median_by_rate": {lr: spreads[lr]["median"] for lr in sorted(spreads)},
        "by_seed": _by_finetuning_seed(
            [r for r in runs if r["learning_rate"] == best]
        ),
    }


def _by_finetuning_seed(runs):
    """`{fine-tuning seed: score}`, the mean over pooled pre-training
    seeds: fine-tunings of one seed share their data order, so a variant's
    row pairs with the control's by that seed."""
    scores = {}
    for r in runs:
        scores.setdefault(r["seed"], []).append(r["score"])
    return {seed: sum(v) / len(v) for seed, v in scores.items()}


def glue_summary(config, finetune, order):
    """`{task: {variant: {...}}}` with the selected learning rate's spread.

    Selection rule: per (variant, task), the learning rate with the highest
    median selection-split metric over fine-tuning seeds (ties: the smaller
    rate); records from before selection splits: the median reported
    (evaluation-split) metric, said by each row's `chosen_on`. The
    runs of every pre-training seed in `glue_pretrain_seeds` are pooled;
    `runs` counts them.
    `median_by_rate` keeps every swept rate's median, so a reader sees what
    the selection chose between.
    """
    summary = {}
    for task in config.glue_tasks:
        rows = {}
        for variant in [CONTROL] + order:
            runs = _glue_runs(config, finetune, task, variant)
            if runs:
                rows[variant] = _glue_row(variant, runs)
        if rows:
            summary[task] = rows
    _pair_with_control(summary)
    return summary


def _pair_with_control(summary):
    """Sets each row's `versus`: the row minus the control by fine-tuning
    seed (`paired_stats`, Holm over every task's rows)."""
    versus = paired_stats.decide(
        {
            (task, v): paired_stats.paired(
                row["by_seed"], rows[CONTROL]["by_seed"]
            )
            for task, rows in summary.items()
            for v, row in rows.items()
            if v != CONTROL and CONTROL in rows
        }
    )
    for task, rows in summary.items():
        for v, row in rows.items():
            row["versus"] = versus.get((task, v))
