"""The study's report: tables and figures from the per-run JSON files only.

Nothing here needs a model, so `report` rebuilds the same `tables.md` and
the same figures, byte for byte, from the same JSON files
(`scripts/compare.py --from_results`).

Example:

>>> from tupe_tf.analysis.study_config import CompareConfig
>>> print(report(CompareConfig())["tables"])  # doctest: +SKIP
"""

import os

from tupe_tf.analysis import study_beyond_table
from tupe_tf.analysis import study_extension
from tupe_tf.analysis import study_plan
from tupe_tf.analysis import study_records
from tupe_tf.analysis import study_stats
from tupe_tf.analysis.study_config import CONTROL
from tupe_tf.analysis.study_config import REFERENCE
from tupe_tf.analysis.study_config import VARIANTS
from tupe_tf.utils import fileio
from tupe_tf.utils.markdown import markdown_table


def report(config):
    """Tables and figures from the per-run JSON files only.

    Writes `<study_results_dir>/tables.md` and the figures under
    `study_figures_dir`; returns a dict with `tables` (the markdown),
    `figures`, `total_wall_seconds`, `total_cpu_seconds`, `done` and
    `pending` (run keys of the plan).
    """
    pretrain, finetune = study_records.load_results(config)
    extensions = study_extension.load(config)
    recorded = pretrain + finetune + extensions
    # Variants on record stay in the tables and figures when a run names
    # fewer (`--variants=rope` to add seeds must not drop the others).
    on_record = {run["variant"] for run in recorded}
    order = [v for v in VARIANTS if v in config.variants or v in on_record]
    planned = study_plan.plan_runs(config)
    done = {
        r.key
        for r in planned
        if os.path.isfile(study_plan.result_path(config, r))
    }
    pending = [r.key for r in planned if r.key not in done]
    total = sum(r["wall_seconds"] for r in recorded)
    cpu = sum(r.get("cpu_seconds", 0.0) for r in recorded)
    tables = render_tables(config, pretrain, finetune, order)
    extension = study_extension.render_table(config, extensions, order)
    if extension:
        tables += "\n" + extension + "\n"
    # Runs beyond the plan (a variant extended with more seeds) are in the
    # tables and in the total, so both counts are given.
    tables += (
        f"\nRuns finished: {len(done)} of {len(planned)} planned, "
        f"{len(recorded)} on record; the recorded runs' "
        f"total wall time: {total / 60:.1f} min, CPU time "
        f"{cpu / 60:.1f} min.\n"
    )
    if pending:
        tables += "Pending: " + ", ".join(f"`{k}`" for k in pending) + ".\n"
    _, results, figures = config.output_locations()
    fileio.make_writable_directory(*results)
    study_records.write_text(
        os.path.join(config.study_results_dir, "tables.md"), tables
    )
    if recorded:
        fileio.make_writable_directory(*figures)
    return {
        "tables": tables,
        "figures": draw_figures(config, pretrain, finetune, order),
        "total_wall_seconds": total,
        "total_cpu_seconds": cpu,
        "done": sorted(done),
        "pending": pending,
    }


def draw_figures(config, pretrain, finetune, order):
    """The study's figures of the recorded runs; returns their paths."""
    from tupe_tf.analysis import study_figures

    figure_dir = config.study_figures_dir
    written = []
    if pretrain:
        written.append(
            study_figures.plot_loss_bands(
                pretrain,
                order,
                config.plateau_loss,
                os.path.join(figure_dir, "val_mlm_loss.png"),
            )
        )
        written.append(
            study_figures.plot_extrapolation(
                pretrain,
                order,
                config.pretrain.seq_length,
                os.path.join(figure_dir, "extrapolation.png"),
            )
        )
    if finetune:
        written.append(
            study_figures.plot_glue(
                glue_summary(config, finetune, order),
                os.path.join(figure_dir, "glue.png"),
            )
        )
    return written


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
        "plateau_exit": study_stats.step_spread(
            [
                study_stats.plateau_exit_step(
                    c["steps"], c["val_loss"], config.plateau_loss
                )
                for c in curves
            ],
            config.pretrain.num_train_steps,
        ),
        "by_length": {
            length: study_stats.spread(
                [r["heldout_loss_by_length"].get(str(length)) for r in runs]
            )
            for length in _all_lengths(config)
        },
    }


def _all_lengths(config):
    return config.eval_lengths + config.beyond_table_lengths


def pretrain_summary(config, pretrain, order):
    """Per variant: spreads over seeds of the study's figures."""
    grouped = _by_variant(pretrain, order)
    reference = grouped.get(REFERENCE, [])
    bert_final = study_stats.spread([r["final_val_loss"] for r in reference])[
        "median"
    ]
    return {
        variant: _variant_summary(config, runs, bert_final)
        for variant, runs in grouped.items()
        if runs
    }


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
    """One GLUE row: the best median learning rate's spread."""
    by_lr = {}
    for r in runs:
        by_lr.setdefault(r["learning_rate"], []).append(r["score"])
    spreads = {lr: study_stats.spread(v) for lr, v in by_lr.items()}
    best = max(sorted(spreads), key=lambda lr: spreads[lr]["median"])
    return {
        "metric": runs[0]["metric"],
        "learning_rate": best,
        "score": spreads[best],
        "runs": len(by_lr[best]),
        # The control is not pre-trained: no seeds to list.
        "pretrain_seeds": []
        if variant == CONTROL
        else sorted(
            {r["pretrain_seed"] for r in runs if r["learning_rate"] == best}
        ),
        "median_by_rate": {lr: spreads[lr]["median"] for lr in sorted(spreads)},
    }


def glue_summary(config, finetune, order):
    """`{task: {variant: {...}}}` with the selected learning rate's spread.

    Selection rule: per (variant, task), the learning rate with the highest
    median dev metric over fine-tuning seeds (ties: the smaller rate). The
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
    return summary


def _pretrain_table(config, summary):
    ref = summary.get(REFERENCE)
    threshold = config.plateau_loss - study_stats.PLATEAU_MARGIN
    header = [
        "variant",
        "seeds",
        "final val MLM loss",
        "vs bert",
        "steps to bert's final loss",
        f"plateau exit (loss < {threshold:g})",
    ]
    rows = []
    for variant, s in summary.items():
        versus = (
            "reference"
            if variant == REFERENCE
            else _versus(s["final"], ref and ref["final"], True)
        )
        rows.append(
            [
                variant,
                ",".join(str(x) for x in s["seeds"]),
                study_stats.format_spread(s["final"]),
                versus,
                s["reach_bert"]["text"],
                s["plateau_exit"]["text"],
            ]
        )
    return (
        "Pre-training: median [min, max] over seeds; `vs bert`: "
        '"no difference" where the min-max intervals overlap. The '
        "validation loss is Keras's: summed over masked tokens, divided by "
        "all prediction slots (empty slots count as zero), so it is below "
        "the per-token held-out loss of the next table.\n\n"
        + markdown_table(header, rows)
    )


def _length_header(config, n):
    if n == config.pretrain.seq_length:
        return f"length {n} (trained)"
    if n in config.beyond_table_lengths:
        return f"length {n} (past the tables)"
    return f"length {n}"


def _scaled_rope_rows(config, pretrain):
    """`rope + <scaling>` rows: the rope models evaluated with a scaling."""
    runs = [r for r in pretrain if study_beyond_table.SCALED_KEY in r]
    rows = []
    for scaling in study_beyond_table.scalings("rope") if runs else []:
        cells = []
        for n in _all_lengths(config):
            losses = [
                r[study_beyond_table.SCALED_KEY][scaling].get(str(n))
                for r in runs
            ]
            spread = study_stats.spread(losses)
            trained = n == config.pretrain.seq_length
            cells.append(
                "as rope" if trained else study_stats.format_spread(spread)
            )
        rows.append([f"rope + {scaling}"] + cells)
    return rows


def _length_table(config, summary, pretrain):
    lengths = _all_lengths(config)
    header = ["variant"] + [_length_header(config, n) for n in lengths]
    rows = [
        [variant]
        + [study_stats.format_spread(s["by_length"][n]) for n in lengths]
        for variant, s in summary.items()
    ] + _scaled_rope_rows(config, pretrain)
    return (
        "Held-out MLM loss by sequence length (one full pass over the "
        f"held-out documents; trained at {config.pretrain.seq_length}). The models' "
        f"position tables end at {max(config.eval_lengths)}: past it only "
        "the options without a length-bound weight run (`-` for the "
        "others); `rope + <scaling>` is the rope models evaluated with "
        "that length scaling, factor = length / "
        f"{config.pretrain.seq_length}:\n\n" + markdown_table(header, rows)
    )


def _versus(spread, baseline, lower_is_better):
    """How `spread` compares to the baseline's (`n/a` without one)."""
    if not baseline:
        return "n/a"
    return study_stats.compare_to(spread, baseline, lower_is_better)


def _glue_cells(variant, row, control, pooled, swept):
    versus = (
        "control"
        if variant == CONTROL
        else _versus(row["score"], control and control["score"], False)
    )
    cells = [
        variant,
        f"{row['learning_rate']:g}",
        study_stats.format_spread(row["score"]),
        versus,
    ]
    if pooled:
        seeds = ",".join(str(s) for s in row["pretrain_seeds"])
        cells.append(f"{seeds or '-'} ({row['runs']})")
    if swept:
        cells.append(
            ", ".join(
                f"{lr:g}: {median:.3f}"
                for lr, median in row["median_by_rate"].items()
            )
        )
    return cells


def _glue_table(config, task, rows):
    metric = next(iter(rows.values()))["metric"]
    pooled = len(config.fine_tuned_pretrain_seeds) > 1
    swept = len(config.finetune.learning_rates) > 1
    header = ["variant", "learning rate", metric, "vs control"]
    if pooled:
        header.append("pre-training seeds (runs)")
    if swept:
        header.append("median at each rate")
    control = rows.get(CONTROL)
    table = markdown_table(
        header,
        [
            _glue_cells(variant, row, control, pooled, swept)
            for variant, row in rows.items()
        ],
    )
    return (
        f"{task} dev {metric}: median [min, max] over fine-tuning seeds "
        + (
            "and the listed pre-training seeds' models, pooled, "
            if pooled
            else ""
        )
        + "at the selected learning rate; `vs control`: against the "
        "no-pre-training control.\n\n" + table
    )


def render_tables(config, pretrain, finetune, order):
    """The study's markdown tables (deterministic given the JSON files)."""
    summary = pretrain_summary(config, pretrain, order)
    sections = [
        _pretrain_table(config, summary),
        _length_table(config, summary, pretrain),
    ]
    for task, rows in glue_summary(config, finetune, order).items():
        sections.append(_glue_table(config, task, rows))
    return "\n\n".join(sections) + "\n"
