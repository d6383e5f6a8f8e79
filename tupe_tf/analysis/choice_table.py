"""One table to choose an encoding from, and the choices the rule supports.

A row per encoding (the study's order), a column per thing an encoding is
chosen for: the masked-LM loss at the training length (with the first
evaluated step below `nope`'s), each position probe at its training length
L and at 2L, the context extension and each GLUE task. A cell is median
[min, max] over seeds (n), marked `*` where the study's one rule
(`paired_stats`, through the comparisons the findings and `probe_report`
already make) calls the encoding better than the column's reference. The
lines below the table (`choice_lines`) are read off the marks: per need,
the marked encodings, best median first, or that none is marked.

Example:

>>> from tupe_tf.analysis import study_stats
>>> print(cell(study_stats.spread([5.1, 5.3, 5.2]), 2, marked=True))
5.20 [5.10, 5.30] (n 3) *
"""

import dataclasses
import glob
import os

from tupe_tf.analysis import probe_report
from tupe_tf.analysis import study_extension
from tupe_tf.analysis import study_records
from tupe_tf.analysis import study_stats
from tupe_tf.analysis import study_summary
from tupe_tf.analysis.study_config import CONTROL
from tupe_tf.analysis.study_config import NO_POSITIONS
from tupe_tf.analysis.study_config import VARIANTS
from tupe_tf.analysis.study_findings_markdown import task_name
from tupe_tf.utils.markdown import markdown_table

MARK = "*"
NO_RECORD = "—"
# Why a column marks nothing when its reference has no records.
_ABSENT = f"`{NO_POSITIONS}` is not on record"
# What each probe (`probe_tasks`) measures, as the lines name the need;
# the probe columns follow this order.
PROBE_NEEDS = {
    "copy": "alignment (copy)",
    "order": "local order",
    "distance": "local distance",
    "passkey": "retrieval at a depth (passkey)",
}


@dataclasses.dataclass
class Column:
    """A column: `header` and `{variant: cell}`; for a need the lines
    answer, the `need`, the part of it (`where`), what a mark says
    (`better`), the marked `(variant, n, median)` best median first
    (`ranked`),
    the seed count of each cell with a value (`counts`) and, where the
    reference has no record, that (`unpaired`)."""

    header: str
    cells: dict
    need: str = ""
    where: str = ""
    better: str = ""
    ranked: list = dataclasses.field(default_factory=list)
    counts: list = dataclasses.field(default_factory=list)
    unpaired: str = ""


def load_probe_records(config):
    """Every record of `config.probe_study` on disk (`[]` without one).

    Not `probe_runner.load_records`: that reads only the runs a full
    `ProbeConfig` plans (its tasks, variants and seeds; its directory
    named from its `seq_length`); the table shows every record there is.
    """
    if not config.probe_results_dir:
        return []
    pattern = os.path.join(config.probe_results_dir, "probes", "*", "*.json")
    return [study_records.read_json(p) for p in sorted(glob.glob(pattern))]


def cell(spread, digits, signed=False, marked=False):
    """`median [min, max] (n k)` (`study_stats.format_spread`), `MARK`
    where the rule calls it better; `NO_RECORD` without a value."""
    if not spread["n"]:
        return NO_RECORD
    text = (
        f"{study_stats.format_spread(spread, digits, signed)} (n {spread['n']})"
    )
    return f"{text} {MARK}" if marked else text


def _median(spread, digits, signed):
    return f"{spread['median']:{'+' if signed else ''}.{digits}f}"


def better(comparison, lower):
    """Whether the rule calls a `paired_stats.Paired` (variant minus
    reference) better: different, and below the reference if `lower`."""
    if comparison is None or not comparison.different:
        return False
    return comparison.mean < 0 if lower else comparison.mean > 0


def measured(
    header, spreads, marked, digits, signed=False, lower=False, **need
):
    """The `Column` of `{variant: spread}`, `marked` the variants the rule
    calls better (`lower`: a lower median is better); `need`: `Column`'s
    `need`, `where` and `better`."""
    sign = 1 if lower else -1
    ranked = sorted(marked, key=lambda v: sign * spreads[v]["median"])
    return Column(
        header,
        {v: cell(s, digits, signed, v in marked) for v, s in spreads.items()},
        # The median beside each name: a mark says "different", the
        # median how far.
        ranked=[
            (v, spreads[v]["n"], _median(spreads[v], digits, signed))
            for v in ranked
        ],
        counts=[s["n"] for s in spreads.values() if s["n"]],
        **need,
    )


def loss_columns(findings):
    """The final validation loss, marked below `nope`'s by the findings'
    comparison, and the first step below it (without `nope`: the loss)."""
    summary = findings.summary
    length = findings.config.pretrain.seq_length
    loss = measured(
        f"MLM loss at {length}",
        {v: s["final"] for v, s in summary.items()},
        [
            v
            for v, s in summary.items()
            if better(s["versus"][NO_POSITIONS], lower=True)
        ],
        3,
        lower=True,
        need=f"the masked-LM loss at {length}",
        better=f"below `{NO_POSITIONS}`",
        unpaired="" if NO_POSITIONS in summary else _ABSENT,
    )
    return [loss, step_column(findings)] if NO_POSITIONS in summary else [loss]


def step_column(findings):
    """The first evaluated step below `nope` by the rule
    (`study_summary.first_steps_below`), with the seeds it pairs."""
    first = study_summary.first_steps_below(findings.pretrain, findings.order)
    baseline = findings.runs[NO_POSITIONS].keys()
    cells = {NO_POSITIONS: "reference"}
    for variant, step in first.items():
        n = len(findings.runs[variant].keys() & baseline)
        cells[variant] = f"{step:,} (n {n})" if step else "not within budget"
    return Column(f"below {NO_POSITIONS} from step", cells)


def not_applicable_notes(probes):
    """`{reason: letter}` of the reasons the records give for a length
    they do not score, shortened (`_reason`)."""
    reasons = dict.fromkeys(
        _reason(r, n) for r in probes for n in r.get("not_applicable", {})
    )
    return {reason: chr(ord("a") + i) for i, reason in enumerate(reasons)}


def _reason(record, length):
    # The records' reason names its variant, which the row does, and ends
    # with where to look (": see ..."), which the probe tables do.
    text = record["not_applicable"][length].split(":")[0]
    return text.replace(record["variant"], "the encoding", 1)


def probe_columns(probes):
    """Per task (every one of `PROBE_NEEDS`, then any other on record):
    accuracy at L and at 2L, marked above `nope` by `probe_report`'s
    comparison; none without records."""
    if not probes:
        return []
    tasks = probe_report.by_task(probes)
    trained = min(r["train_length"] for r in probes)
    notes = not_applicable_notes(probes)
    return [
        _probe_column(task, tasks.get(task, []), length, notes)
        for task in list(PROBE_NEEDS) + sorted(set(tasks) - set(PROBE_NEEDS))
        for length in (trained, 2 * trained)
    ]


def _probe_column(task, records, length, notes):
    gaps = probe_report.gaps_to_nope(records, length)
    column = measured(
        f"{task} {length}",
        {
            v: study_stats.spread(list(seeds.values()))
            for v, seeds in probe_report.accuracies(records, length).items()
        },
        [v for v, gap in gaps.items() if probe_report.uses_positions(gap)],
        2,
        need=PROBE_NEEDS.get(task, task),
        where=f"at {length}",
        better=f"above `{NO_POSITIONS}`",
        unpaired="" if gaps else _ABSENT,
    )
    for r in records:
        if str(length) in r.get("not_applicable", {}):
            letter = notes[_reason(r, str(length))]
            column.cells.setdefault(r["variant"], f"n/a ({letter})")
    return column


def extension_column(findings):
    """Per seed, the long-minus-short gap after the second phase minus
    before (`study_extension.gaps`), marked where the findings' comparison
    (`extension_rows`) calls it smaller; None without records."""
    rows = findings.extension_rows()
    if not rows:
        return None
    short = findings.config.pretrain.seq_length
    long = findings.config.extension_length
    changes = {row["variant"]: [] for row in rows}
    for r in findings.extensions:
        if r["num_train_steps"] == rows[0]["steps"]:
            before, after = study_extension.gaps(r, str(short), str(long))
            changes[r["variant"]].append(after - before)
    return measured(
        f"extension {short}->{long}",
        {v: study_stats.spread(c) for v, c in changes.items()},
        [row["variant"] for row in rows if better(row["change"], lower=True)],
        3,
        signed=True,
        lower=True,
        need=f"context extension {short} -> {long}",
        better="shrinking its gap",
    )


def glue_columns(findings):
    """Per GLUE task: the score minus the control's at the same
    fine-tuning seed, marked above it by the findings' comparison."""
    columns = []
    for task, rows in findings.glue.items():
        control = rows.get(CONTROL, {}).get("by_seed", {})
        tuned = {v: row for v, row in rows.items() if v != CONTROL}
        differences = {
            v: [
                s - control[k]
                for k, s in row["by_seed"].items()
                if k in control
            ]
            for v, row in tuned.items()
        }
        columns.append(
            measured(
                f"GLUE {task_name(task)}",
                {v: study_stats.spread(d) for v, d in differences.items()},
                [
                    v
                    for v, row in tuned.items()
                    if better(row["versus"], lower=False)
                ],
                3,
                signed=True,
                need="GLUE",
                where=task_name(task),
                better="above the control",
            )
        )
    return columns


def columns(findings, probes):
    """Every column of the table, in order."""
    extension = extension_column(findings)
    return (
        loss_columns(findings)
        + probe_columns(probes)
        + ([extension] if extension else [])
        + glue_columns(findings)
    )


def table(findings, probes, found):
    """The markdown table of the columns `found`: a row per variant of the
    study or the probes, in the study's order."""
    probed = {r["variant"] for r in probes}
    variants = [v for v in VARIANTS if v in findings.order or v in probed]
    return markdown_table(
        ["variant"] + [c.header for c in found],
        [[v] + [c.cells.get(v, NO_RECORD) for c in found] for v in variants],
    )
