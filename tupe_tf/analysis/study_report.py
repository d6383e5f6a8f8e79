"""The study's report: tables and figures from the per-run JSON files only.

Nothing here needs a model, so `report` rebuilds the same `tables.md` and
the same figures, byte for byte, from the same JSON files
(`scripts/compare.py --from_results`).

Example:

>>> from tupe_tf.analysis.study_config import CompareConfig
>>> print(report(CompareConfig())["tables"])  # doctest: +SKIP
"""

import dataclasses
import os

from tupe_tf.analysis import choice_table
from tupe_tf.analysis import paired_stats
from tupe_tf.analysis import study_beyond_table
from tupe_tf.analysis import study_extension
from tupe_tf.analysis import study_figures
from tupe_tf.analysis import study_findings
from tupe_tf.analysis import study_findings_markdown
from tupe_tf.analysis import study_findings_tuning
from tupe_tf.analysis import study_plan
from tupe_tf.analysis import study_records
from tupe_tf.analysis import study_stats
from tupe_tf.analysis import study_summary
from tupe_tf.analysis.study_config import CONTROL
from tupe_tf.analysis.study_config import NO_POSITIONS
from tupe_tf.analysis.study_config import REFERENCE
from tupe_tf.analysis.study_config import VARIANTS
from tupe_tf.analysis.study_findings_markdown import evaluation_name
from tupe_tf.analysis.study_findings_markdown import task_name
from tupe_tf.utils import fileio
from tupe_tf.utils.markdown import markdown_table

# Pre-trainings run again with their record kept (`study_plan.rerun_path`).
RERUNS = os.path.join(study_plan.RERUN_DIR, "pretrain")


def report(config):
    """Tables and figures from the per-run JSON files only.

    Writes `<study_results_dir>/tables.md`, the findings
    (`write_findings`), the figures under `study_figures_dir` and the
    findings blocks of `config.findings_docs`; returns a dict with `tables` (the markdown),
    `figures`, `total_wall_seconds`, `total_cpu_seconds`, `done` and
    `pending` (run keys of the plan).
    """
    records = load_records(config)
    pretrain, finetune, extensions, order = (
        records.pretrain,
        records.finetune,
        records.extensions,
        records.order,
    )
    recorded = pretrain + finetune + extensions
    blocks = findings(config, records)
    # Every file the report rewrites is checked before any is written.
    docs = {
        path: study_findings_markdown.updated_doc(
            path, config.name, blocks, config.study_results_dir
        )
        for path in config.findings_docs
        if blocks
    }
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
    extension = study_extension.render_table(
        config, extensions, pretrain, order
    )
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
    if blocks:
        write_findings(config, records, blocks)
    for path, text in docs.items():
        study_records.write_text(os.path.abspath(path), text)
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


@dataclasses.dataclass
class Records:
    """The study's finished-run dicts by kind, the variants in table
    order, and the position probes' records (`config.probe_study`)."""

    pretrain: list
    finetune: list
    extensions: list
    reruns: list
    order: list
    probes: list = dataclasses.field(default_factory=list)


def load_records(config):
    """The study's `Records` (from the JSON files only)."""
    pretrain, finetune = study_records.load_results(config)
    extensions = study_extension.load(config)
    # Variants on record stay in the tables and figures when a run names
    # fewer (`--variants=rope` to add seeds must not drop the others).
    on_record = {run["variant"] for run in pretrain + finetune + extensions}
    order = [v for v in VARIANTS if v in config.variants or v in on_record]
    reruns = study_records.load_kind(config, RERUNS)
    probes = choice_table.load_probe_records(config)
    return Records(pretrain, finetune, extensions, reruns, order, probes)


def findings(config, records=None):
    """`{block: markdown}` of `study_findings.Findings` of the records."""
    records = records or load_records(config)
    return study_findings.Findings(
        config,
        records.pretrain,
        records.finetune,
        records.extensions,
        records.reruns,
        records.order,
        records.probes,
    ).blocks()


def write_findings(config, records, blocks):
    """Writes `findings.md` (of the `findings` `blocks`) and
    `glue_other_selections.md` (where the records allow another
    selection)."""
    finetune, order = records.finetune, records.order
    directory = config.study_results_dir
    study_records.write_text(
        os.path.join(directory, "findings.md"),
        study_findings_markdown.render(config.name, blocks),
    )
    selections = render_glue_selections(config, finetune, order)
    if selections:
        study_records.write_text(
            os.path.join(directory, "glue_other_selections.md"), selections
        )


def render_glue_selections(config, finetune, order):
    """The GLUE tables under the other selections on record ('' if none)."""
    sections = []
    for title, view in study_findings_tuning.other_glue_selections(
        config, finetune
    ):
        tables = [
            _glue_table(view, task, rows)
            for task, rows in study_summary.glue_summary(
                view, finetune, order
            ).items()
        ]
        sections.append(
            f"## {title[0].upper()}{title[1:]}\n\n" + "\n\n".join(tables)
        )
    if not sections:
        return ""
    rates = ", ".join(f"{lr:g}" for lr in config.finetune.learning_rates)
    seeds = ", ".join(str(s) for s in config.fine_tuned_pretrain_seeds)
    return (
        "# GLUE under the other selections on record\n\nWritten from the "
        "per-run JSON files beside this file by `scripts/compare.py`. "
        f"[`tables.md`](tables.md) reports learning rate {rates} and the "
        f"models of pre-training seed {seeds}; here are the same runs at "
        "each other rate on record, no rate chosen per row, and pooled "
        "over pre-training seeds, where a variant's score at a fine-tuning "
        "seed is the mean of its models' there, paired with the "
        "control's.\n\n" + "\n\n".join(sections) + "\n"
    )


def draw_figures(config, pretrain, finetune, order):
    """The study's figures of the recorded runs; returns their paths."""
    figure_dir = config.study_figures_dir
    written = []
    if pretrain:
        written.append(
            study_figures.plot_loss_bands(
                pretrain,
                order,
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
                study_summary.glue_summary(config, finetune, order),
                os.path.join(figure_dir, "glue.png"),
            )
        )
    return written


def _pretrain_table(summary):
    header = [
        "variant",
        "seeds",
        "final val MLM loss",
        f"minus {REFERENCE}'s",
        f"minus {NO_POSITIONS}'s",
        "steps to bert's final loss",
    ]
    rows = [
        [
            variant,
            ",".join(str(x) for x in s["seeds"]),
            study_stats.format_spread(s["final"]),
        ]
        + [
            "reference"
            if variant == baseline
            else paired_stats.describe(s["versus"][baseline])
            for baseline in (REFERENCE, NO_POSITIONS)
        ]
        + [s["reach_bert"]["text"]]
        for variant, s in summary.items()
    ]
    return (
        "Pre-training: median [min, max] over seeds; `minus bert's`, "
        "`minus nope's`: the final loss minus the other's at the same seed, "
        "mean [min, max] over seeds, with the rule of `paired_stats` (a "
        "paired t-test, Holm over the column; `nope`'s is the "
        "bag-of-words level). The validation loss is Keras's: summed over "
        "masked tokens, divided by all prediction slots (empty slots count "
        "as zero), so it is below the per-token held-out loss of the next "
        "table.\n\n" + markdown_table(header, rows)
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
        for n in study_summary.all_lengths(config):
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
    lengths = study_summary.all_lengths(config)
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


def _glue_cells(variant, row, pooled, swept):
    versus = (
        "control"
        if variant == CONTROL
        else paired_stats.describe(row.get("versus"))
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


def _rate_text(config, rows):
    """At which learning rate the rows of a GLUE table are: the one
    configured, or each row's choice and what it was chosen on."""
    rates = config.finetune.learning_rates
    if len(rates) == 1:
        return f"at learning rate {rates[0]:g}"
    on = {
        "selection": "the selection split",
        "evaluation": "this same evaluation file",
    }
    chosen = sorted({row["chosen_on"] for row in rows.values()} - {None})
    if not chosen:
        return "at the one rate each row has on record"
    return "at the rate of each row's best median on " + " or ".join(
        on[c] for c in chosen
    )


def _glue_table(config, task, rows):
    metric = next(iter(rows.values()))["metric"]
    pooled = len(config.fine_tuned_pretrain_seeds) > 1
    swept = len(config.finetune.learning_rates) > 1
    header = ["variant", "learning rate", metric, "minus control"]
    if pooled:
        header.append("pre-training seeds (runs)")
    if swept:
        header.append("median at each rate")
    table = markdown_table(
        header,
        [
            _glue_cells(variant, row, pooled, swept)
            for variant, row in rows.items()
        ],
    )
    return (
        f"{task_name(task)} {metric} on the {evaluation_name(task)}: median "
        "[min, max] over fine-tuning seeds "
        + (
            "and the listed pre-training seeds' models, pooled, "
            if pooled
            else ""
        )
        + _rate_text(config, rows)
        + "; `minus control`: the score minus "
        "the no-pre-training control's at the same fine-tuning seed (the "
        "rule of `paired_stats`, Holm over every task's rows).\n\n" + table
    )


def render_tables(config, pretrain, finetune, order):
    """The study's markdown tables (deterministic given the JSON files)."""
    summary = study_summary.pretrain_summary(config, pretrain, order)
    sections = [
        _pretrain_table(summary),
        _length_table(config, summary, pretrain),
    ]
    for task, rows in study_summary.glue_summary(
        config, finetune, order
    ).items():
        sections.append(_glue_table(config, task, rows))
    return "\n\n".join(sections) + "\n"
