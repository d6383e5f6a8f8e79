"""Tables and findings of the position probes, from their records.

One markdown table per task: a row per variant, a column per evaluated
length, each cell the median [min, max] accuracy over the seeds recorded
with their number (`n/a` where the encoding does not run there), and a
first row with the chance level (the best accuracy without positions).
A cell is marked `*` where the study's one decision rule
(`tupe_tf.analysis.paired_stats`) puts the variant above `nope` of the
same seeds: "uses positions" on that task at that length, measured as the
paired gap to the encoding without any. Each (task, length) is one family
of the Holm correction.

Example:

>>> record = {"task": "copy", "variant": "rope", "seed": 0,
...           "chance": {"32": 0.09}, "accuracy": {"32": 1.0}}
>>> print(tables([record]))
### copy
<BLANKLINE>
| variant | 32 |
| --- | --- |
| chance | 0.09 |
| rope | 1.00 (n 1) |
"""

import collections
import os

from tupe_tf.analysis import paired_stats
from tupe_tf.analysis import study_records
from tupe_tf.analysis.study_config import NO_POSITIONS
from tupe_tf.analysis.study_stats import spread
from tupe_tf.utils.markdown import markdown_table


def by_task(records):
    """`{task: [records]}` in the order the records name the tasks."""
    tasks = collections.defaultdict(list)
    for record in records:
        tasks[record["task"]].append(record)
    return dict(tasks)


def _lengths(records):
    return sorted({int(n) for r in records for n in r["chance"]})


def accuracies(records, length):
    """`{variant: {seed: accuracy}}` at `length` (where it was scored)."""
    table = collections.defaultdict(dict)
    for r in records:
        if str(length) in r["accuracy"]:
            table[r["variant"]][r["seed"]] = r["accuracy"][str(length)]
    return dict(table)


def gaps_to_nope(records, length):
    """`{variant: Paired}`: accuracy minus `nope`'s at the same seed, Holm
    over the variants scored at `length` (the family); empty without
    `nope` records."""
    values = accuracies(records, length)
    nope = values.get(NO_POSITIONS)
    if not nope:
        return {}
    return paired_stats.decide(
        {
            variant: paired_stats.paired(seeds, nope)
            for variant, seeds in values.items()
            if variant != NO_POSITIONS
        }
    )


def uses_positions(gap):
    """Whether the rule puts a variant above `nope` (its paired gap)."""
    return gap is not None and gap.different and gap.mean > 0


def _cell(seeds, gap):
    """`median [min, max] (n k)`, `*` when above `nope` by the rule."""
    if not seeds:
        return "n/a"
    s = spread(list(seeds.values()))
    text = f"{s['median']:.2f}"
    if s["n"] > 1:
        text += f" [{s['low']:.2f}, {s['high']:.2f}]"
    text += f" (n {s['n']})"
    return text + (" *" if uses_positions(gap) else "")


def _chance_cell(values):
    values = [v for v in values if v is not None]
    low, high = min(values), max(values)
    return f"{low:.2f}" if high - low < 0.005 else f"{low:.2f}-{high:.2f}"


def task_table(records):
    """The markdown table of one task's records."""
    lengths = _lengths(records)
    columns = {
        n: (accuracies(records, n), gaps_to_nope(records, n)) for n in lengths
    }
    variants = list(dict.fromkeys(r["variant"] for r in records))
    rows = [
        [
            "chance",
            *(
                _chance_cell([r["chance"].get(str(n)) for r in records])
                for n in lengths
            ),
        ]
    ]
    for variant in variants:
        rows.append(
            [variant]
            + [
                _cell(values.get(variant), gaps.get(variant))
                for values, gaps in (columns[n] for n in lengths)
            ]
        )
    return markdown_table(["variant", *map(str, lengths)], rows)


def tables(records):
    """Every task's table, in the order the records name the tasks."""
    return "\n\n".join(
        f"### {task}\n\n{task_table(runs)}"
        for task, runs in by_task(records).items()
    )


def findings(records):
    """One bullet per task: at the training length and at the longest
    length scored, the variants above `nope` by the rule, largest paired
    gap first, with the gap's mean [min, max], n and Holm's p."""
    lines = []
    for task, runs in by_task(records).items():
        lengths = _lengths(runs)
        parts = []
        for length in dict.fromkeys((lengths[0], lengths[-1])):
            gaps = gaps_to_nope(runs, length)
            above = sorted(
                (v for v, g in gaps.items() if uses_positions(g)),
                key=lambda v: -gaps[v].mean,
            )
            listed = "; ".join(
                f"{v} {paired_stats.describe(gaps[v], digits=2)}" for v in above
            )
            parts.append(
                f"at {length}, {len(above)} of {len(gaps)} above nope"
                + (f" ({listed})" if listed else "")
            )
        lines.append(f"- **{task}**: " + "; ".join(parts) + ".")
    return "\n".join(lines)


def report(records):
    """`tables.md` of a probe study: the findings, then every table."""
    return (
        "# Position probes\n\nWritten from the records beside this file by "
        "`scripts/probe.py` (after its runs, and `--from_results`). A cell is "
        "the median [min, max] accuracy over seeds (n); `*`: above `nope` "
        "of the same seeds by the study's rule "
        "(`tupe_tf/analysis/paired_stats.py`, Holm over the variants of "
        "one task and length).\n\n## Findings\n\n"
        f"{findings(records)}\n\n## Tables\n\n{tables(records)}\n"
    )


def write_report(study_dir, records):
    """Writes `report(records)` to `<study_dir>/tables.md`; its path."""
    path = os.path.join(study_dir, "tables.md")
    study_records.write_text(path, report(records))
    return path
