"""The words around the choice table: its legend, the rule, and the
"use X when Y" lines read off its marks.

`choice_table` computes the columns; here each column that answers a need
(`Column.need`) becomes part of that need's line: the variants the rule
marks, best median first with their medians and seed counts, or that none is marked
and at how many seeds. `summary` says the same in one clause for the
README.

Example:

>>> from tupe_tf.analysis.choice_table import Column
>>> column = Column("copy 32", {}, "alignment (copy)", "at 32",
...                 "above `nope`", ranked=[("rope", 3, "0.98")], counts=[3, 3])
>>> use_lines([column])
['For **alignment (copy)**: at 32, use `rope` (0.98, n 3).']
"""

from tupe_tf.analysis import paired_stats
from tupe_tf.analysis.choice_table import NO_RECORD
from tupe_tf.analysis.choice_table import not_applicable_notes
from tupe_tf.analysis.choice_table import table
from tupe_tf.analysis.study_config import NO_POSITIONS
from tupe_tf.analysis.study_findings_markdown import bullets
from tupe_tf.analysis.study_findings_markdown import join
from tupe_tf.analysis.study_findings_markdown import names
from tupe_tf.analysis.study_findings_markdown import seeds_text
from tupe_tf.analysis.study_findings_markdown import wrap


def _outcome(column):
    """What a column says for its need: the marked variants, or none."""
    if column.ranked:
        return "use " + ", ".join(
            f"`{v}` ({median}, n {n})" for v, n, median in column.ranked
        )
    if not column.counts:
        return "no score on record"
    if column.unpaired:
        return f"{column.unpaired} to compare with"
    seeds = seeds_text(column.counts)
    return f"no encoding is {column.better} by the rule at {seeds}"


def _answer(columns):
    """What the columns of one need say: each part's outcome, the parts
    with the same outcome said once."""
    outcomes = {}
    for column in columns:
        outcomes.setdefault(_outcome(column), []).append(column.where)
    return "; ".join(
        f"{join(w for w in where if w)}, {outcome}" if any(where) else outcome
        for outcome, where in outcomes.items()
    )


def use_lines(found):
    """One line per need of the columns `found` (`Column.need`), the
    needs with the same answer on one line."""
    needs = {}
    for column in found:
        if column.need:
            needs.setdefault(column.need, []).append(column)
    answers = {}
    for need, columns in needs.items():
        answers.setdefault(_answer(columns), []).append(f"**{need}**")
    return [f"For {join(n)}: {answer}." for answer, n in answers.items()]


def summary(found):
    """The lines in one clause: the marked variants per need (part), then
    the needs without any, by their seed counts (or without a record)."""
    marked, unmarked = [], {}
    for column in (c for c in found if c.need):
        if column.ranked:
            part = f"{column.need} {column.where}".strip()
            marked.append(f"for {part} {names(v for v, *_ in column.ranked)}")
    for need in dict.fromkeys(c.need for c in found if c.need):
        parts = [c for c in found if c.need == need]
        counts = [n for c in parts for n in c.counts]
        if not any(c.ranked for c in parts):
            at = f"at {seeds_text(counts)}" if counts else "on record"
            unmarked.setdefault(at, []).append(need)
    none = [f"no encoding {at} for {join(n)}" for at, n in unmarked.items()]
    return "marks " + "; ".join(marked + none)


def legend(findings, probes):
    """What the cells and each column are, from the settings."""
    config = findings.config
    short, long = config.pretrain.seq_length, config.extension_length
    parts = [
        "Median [min, max] over seeds (n); `*`: better than the column's "
        "reference by the rule. MLM loss: final validation loss "
        f"({config.pretrain.num_train_steps:,} steps), `*` below "
        f"`{NO_POSITIONS}`'s, the bag-of-words level"
    ]
    if NO_POSITIONS in findings.summary:
        parts[0] += (
            f", and the first evaluation (every {config.eval_interval} "
            "steps) below it"
        )
    if probes:
        trained = min(r["train_length"] for r in probes)
        parts.append(
            f"[probes](../{config.probe_study}/tables.md): accuracy, trained "
            f"at {trained}, scored at {trained} and {2 * trained}, `*` above "
            f"`{NO_POSITIONS}`'s"
        )
        notes = not_applicable_notes(probes).items()
        parts += [f"n/a ({letter}): {reason}" for reason, letter in notes]
    rows = findings.extension_rows()
    if rows:
        parts.append(
            f"extension: the gap, loss at {long} minus at {short}, after "
            f"{rows[0]['steps']} more steps at {long} minus before, `*` smaller"
        )
    if findings.glue:
        parts.append(
            "GLUE: minus the no-pre-training control at the same fine-tuning "
            "seed, `*` above it"
        )
    return "; ".join(parts) + f"; {NO_RECORD}: no record."


def rule():
    """The line saying what a mark is, and that the lines use the marks."""
    return (
        "**Rule** ([`paired_stats`](../../../tupe_tf/analysis/"
        "paired_stats.py)): a paired t-test of the per-seed differences to "
        "the column's reference, two-sided, Holm over the study's families, "
        f"p <= {paired_stats.ALPHA:g}, marks the cells it calls better; the "
        "lines name exactly those, best median first."
    )


def block(findings, probes, found):
    """The `choice` block of the columns `found`: the legend, the table,
    the rule and the lines."""
    return "\n\n".join(
        [
            wrap(legend(findings, probes)),
            table(findings, probes, found),
            bullets([rule()] + use_lines(found)),
        ]
    )
