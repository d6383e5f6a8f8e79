"""The findings in markdown: their wording, `findings.md`, and the blocks
of them that documents carry between markers.

`names`, `join`, `seeds_text`, `differences`, `called`, `task_name` and
`evaluation_name` spell what the findings (`study_findings`) name; `wrap`
and `bullets` break them into the lines of the docs. `render` writes
`findings.md`; `updated_doc` rewrites a markdown file's blocks
(`doc_blocks`) of a study, their relative links rebased (`rebase_links`).

Example:

>>> print(names(["rope", "shaw", "tupe-r"]))
`rope`, `shaw` and `tupe-r`
"""

import os
import re
import textwrap

from data_pipeline.glue import GLUE_TASKS
from tupe_tf.analysis import paired_stats
from tupe_tf.utils.errors import UserError

# The line width of the docs the blocks go into.
WIDTH = 100
# The blocks of `findings.md`, in order, with their headings.
BLOCKS = {
    "choice": "The table to choose from",
    "answer": "Each comparison",
    "details": "Details",
    "reproducibility": "Reproducibility",
    "readme": "For the README",
}
# What the study's GLUE scores are on: the evaluation files (`dev.tsv`) of
# ../shared/data/glue, which are not GLUE's dev splits
# (`data_pipeline.glue.KNOWN_EVAL_FILES`).
EVALUATION_FILES = {"cola": "CoLA out-of-domain set", "sst2": "SST test split"}


def names(variants):
    """`a`, `b` and `c` (empty string for none)."""
    return join([f"`{v}`" for v in variants])


def join(items):
    """a, b and c."""
    items = list(items)
    if len(items) < 2:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def seeds_text(counts):
    """ "3 seeds each", or "1-3 seeds" when the variants differ."""
    low, high = min(counts), max(counts)
    noun = "seed" if high == 1 else "seeds"
    if low == high:
        return f"{low} {noun} each"
    return f"{low}-{high} seeds per variant"


def differences(versus):
    """`` `a` -0.976 [-1.026, -0.887], `b` +0.022 [...] ``: each variant of
    `{variant: paired_stats.Paired}` with its difference."""
    return ", ".join(
        f"`{v}` {paired_stats.format_difference(c)}" for v, c in versus.items()
    )


def called(versus, against="", name=lambda v: f"`{v}`"):
    """ "different by the rule: none of 14", or the entries of `{key:
    paired_stats.Paired}` the rule calls different (`name(key)`)."""
    different = [name(k) for k, c in versus.items() if c and c.different]
    total = sum(c is not None for c in versus.values())
    return (
        f"different{against} by the rule: {join(different) or 'none'} of "
        f"{total}"
    )


def task_name(task):
    """GLUE's name of a task (`CoLA`), or the key itself."""
    return GLUE_TASKS[task].directory if task in GLUE_TASKS else task


def evaluation_name(task):
    """What the study's scores of `task` are on (`CoLA out-of-domain
    set`), by `EVALUATION_FILES`, else `<task> evaluation file`."""
    return EVALUATION_FILES.get(task, f"{task_name(task)} evaluation file")


def wrap(text, first="", then=""):
    """`text` in lines of at most `WIDTH` characters (names whole)."""
    return textwrap.fill(
        text,
        WIDTH,
        initial_indent=first,
        subsequent_indent=then,
        break_long_words=False,
        break_on_hyphens=False,
    )


def bullets(texts):
    return "\n".join(wrap(t, "- ", "  ") for t in texts if t)


def _marker(study, block):
    return (
        f"<!-- {study} {block}: generated from the records by "
        "scripts/compare.py; do not edit -->",
        f"<!-- end {study} {block} -->",
    )


def render(study, blocks):
    """`findings.md`: every block under its heading."""
    sections = [
        f"# Findings of {study}\n\nWritten from the per-run JSON files "
        "beside this file by `scripts/compare.py` (every run's report, and "
        "`--from_results`); the tables are in [`tables.md`](tables.md)."
    ]
    for block, heading in BLOCKS.items():
        if blocks.get(block):
            sections.append(f"## {heading}\n\n{blocks[block]}")
    return "\n\n".join(sections) + "\n"


def doc_blocks(text, study):
    """`{block: content}` of the findings blocks of `study` in `text`."""
    found = {}
    for block in BLOCKS:
        begin, end = _marker(study, block)
        pattern = re.escape(begin) + r"\n(.*?)" + re.escape(end)
        match = re.search(pattern, text, flags=re.S)
        if match:
            found[block] = match.group(1).removesuffix("\n")
    return found


# A relative markdown link target: not a URL, not an anchor of the page.
_RELATIVE_LINK = re.compile(r"\]\((?![a-z]+:|#)([^)\s#]+)")


def rebase_links(content, source_dir, path):
    """`content`, written beside `findings.md` in `source_dir`, with its
    relative links pointing to the same files from the document `path`."""
    doc_dir = os.path.dirname(os.path.abspath(path))

    def rebased(match):
        target = os.path.join(os.path.abspath(source_dir), match.group(1))
        return "](" + os.path.relpath(target, doc_dir)

    return _RELATIVE_LINK.sub(rebased, content)


def updated_doc(path, study, blocks, source_dir):
    """The text of the markdown file `path` with its findings blocks of
    `study` rewritten from `blocks` (written for `source_dir`, where
    `findings.md` goes: `rebase_links`).

    Raises:
        UserError: `path` has no block of `study`.
    """
    with open(path) as f:
        text = f.read()
    present = doc_blocks(text, study)
    if not present:
        begin, end = _marker(study, "choice")
        raise UserError(
            f"--findings_docs: {path} has no findings block of {study}; "
            f"add one, e.g. '{begin}' and '{end}' on lines of their own."
        )
    for block in present:
        begin, end = _marker(study, block)
        content = rebase_links(blocks.get(block, ""), source_dir, path)
        text = re.sub(
            re.escape(begin) + r"\n.*?" + re.escape(end),
            lambda _: f"{begin}\n{content}{chr(10) if content else ''}{end}",
            text,
            flags=re.S,
        )
    return text
