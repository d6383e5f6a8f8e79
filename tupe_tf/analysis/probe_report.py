"""Tables of the position probes, from their records (no TensorFlow).

One markdown table per task: a row per variant, a column per evaluated
length, each cell the median [min, max] accuracy over the seeds recorded
(`n/a` where the encoding does not run there), and a first row with the
chance level (the best accuracy without positions, the same for every
variant).

Example:

>>> record = {"task": "copy", "variant": "rope", "seed": 0,
...           "chance": {"32": 0.09}, "accuracy": {"32": 1.0}}
>>> print(tables([record]))
### copy
<BLANKLINE>
| variant | 32 |
| --- | --- |
| chance | 0.09 |
| rope | 1.00 (1 seed) |
"""

import collections

from tupe_tf.analysis.study_stats import spread
from tupe_tf.utils.markdown import markdown_table


def _cell(values):
    """`median [min, max] (n seeds)` of `values`, or `n/a`."""
    if not values:
        return "n/a"
    s = spread(values)
    if s["n"] == 1:
        return f"{s['median']:.2f} (1 seed)"
    return (
        f"{s['median']:.2f} [{s['low']:.2f}, {s['high']:.2f}] ({s['n']} seeds)"
    )


def _lengths(records):
    return sorted({int(n) for r in records for n in r["chance"]})


def task_table(records):
    """The markdown table of one task's records."""
    lengths = _lengths(records)
    by_variant = collections.defaultdict(list)
    for record in records:
        by_variant[record["variant"]].append(record)
    chance = [
        _chance_cell([r["chance"].get(str(n)) for r in records])
        for n in lengths
    ]
    rows = [["chance", *chance]]
    for variant, runs in by_variant.items():
        rows.append(
            [variant]
            + [
                _cell(
                    [
                        r["accuracy"][str(n)]
                        for r in runs
                        if str(n) in r["accuracy"]
                    ]
                )
                for n in lengths
            ]
        )
    return markdown_table(["variant", *map(str, lengths)], rows)


def _chance_cell(values):
    values = [v for v in values if v is not None]
    low, high = min(values), max(values)
    return f"{low:.2f}" if high - low < 0.005 else f"{low:.2f}-{high:.2f}"


def tables(records):
    """Every task's table, in the order the records name the tasks."""
    by_task = collections.defaultdict(list)
    for record in records:
        by_task[record["task"]].append(record)
    return "\n\n".join(
        f"### {task}\n\n{task_table(runs)}" for task, runs in by_task.items()
    )
