"""The study's findings in words, written from the per-run JSON files only.

Every number and every grouping of variants in these sentences is computed
from the records by the rules of the tables (`study_stats`: median [min,
max] over seeds, "no difference" where the min-max intervals overlap), with
the seed count it rests on; nothing is typed by hand. `report` writes them
to `findings.md` beside `tables.md`, and rewrites the blocks of them that
markdown files (the project's `README.md` and `docs/results.md`) carry
between markers (`--findings_docs`); tests/analysis/test_docs.py checks
that those blocks follow from the committed records.

Example:

>>> print(names(["rope", "shaw", "tupe-r"]))
`rope`, `shaw` and `tupe-r`
"""

import os
import re
import textwrap

from data_pipeline.glue import GLUE_TASKS
from tupe_tf.analysis import study_beyond_table
from tupe_tf.analysis import study_extension
from tupe_tf.analysis import study_stats
from tupe_tf.analysis import study_summary
from tupe_tf.analysis.study_config import CONTROL
from tupe_tf.analysis.study_config import REFERENCE
from tupe_tf.utils.errors import UserError

# The variant without any position: at a seed, the curves of the variants
# without input positions agree with its curve within PARTING_TOLERANCE
# until their positions matter, and its extension gap is what packing the
# held-out text longer costs a model that cannot use positions.
NO_POSITIONS = "nope"
PARTING_TOLERANCE = 0.005
# The line width of the docs the blocks go into.
WIDTH = 100
# The blocks of `findings.md`, in order, with their headings.
BLOCKS = {
    "answer": "Short answer",
    "details": "Details",
    "reproducibility": "Reproducibility",
    "readme": "For the README",
}


def names(variants):
    """`a`, `b` and `c` (empty string for none)."""
    return join([f"`{v}`" for v in variants])


def join(items):
    """a, b and c."""
    items = list(items)
    if len(items) < 2:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def _spread(values, signed=False):
    return study_stats.format_spread(study_stats.spread(values), signed=signed)


def _seeds_text(counts):
    """ "3 seeds each", or "1-3 seeds" when the variants differ."""
    low, high = min(counts), max(counts)
    noun = "seed" if high == 1 else "seeds"
    if low == high:
        return f"{low} {noun} each"
    return f"{low}-{high} seeds per variant"


def _steps_text(values, budget):
    """`study_stats.step_spread`'s text with thousands separators."""
    text = study_stats.step_spread(values, budget)["text"]
    return re.sub(r"\d{4,}", lambda m: f"{int(m.group()):,}", text)


def _reached(values):
    """ "2 of 3 seeds": how many of `values` are reached steps."""
    return f"{sum(v is not None for v in values)} of {len(values)} seeds"


def _event_steps(values, budget):
    """`step 900 [800, 1,100]` when every seed got there, else the steps
    of the seeds that did (`steps 1,300 and 1,700`)."""
    reached = sorted(v for v in values if v is not None)
    if len(reached) == len(values) and len(values) > 1:
        return f"step {_steps_text(values, budget)}"
    listed = [f"{v:,}" for v in reached]
    return ("step " if len(listed) == 1 else "steps ") + join(listed)


def task_name(task):
    """GLUE's name of a task (`CoLA`), or the key itself."""
    return GLUE_TASKS[task].directory if task in GLUE_TASKS else task


def _sort_key(values):
    """Orders event steps: more seeds reaching, then the earlier median."""
    reached = sorted(v for v in values if v is not None)
    middle = reached[(len(reached) - 1) // 2] if reached else 0
    return (-len(reached), middle)


# The extension's groups of variants, in the order the text gives them.
EXTENSION_GROUPS = {
    "below": "below `{base}`'s after it",
    "every": "narrowed in every seed",
    "some": "narrowed in some seeds",
    "none": "not narrowed",
}


class Findings:
    """The findings of one study's records.

    Args:
        config: the `CompareConfig` (its thresholds, budget and the GLUE
            selection).
        pretrain, finetune, extensions, reruns: the finished-run dicts
            (`study_records.load_kind`).
        order: the variants in table order.
    """

    def __init__(self, config, pretrain, finetune, extensions, reruns, order):
        self.config = config
        self.pretrain = pretrain
        self.finetune = finetune
        self.extensions = extensions
        self.reruns = reruns
        self.budget = config.pretrain.num_train_steps
        self.summary = study_summary.pretrain_summary(config, pretrain, order)
        self.glue = study_summary.glue_summary(config, finetune, order)
        self.order = [v for v in order if v in self.summary]
        self.runs = {}
        for run in pretrain:
            self.runs.setdefault(run["variant"], {})[run["seed"]] = run

    def _curve_steps(self, variant, event):
        """Per seed of `variant`: the step of `event(steps, losses)`."""
        return [
            event(run["curve"]["steps"], run["curve"]["val_loss"])
            for run in self.runs[variant].values()
        ]

    def _exits(self, variant):
        plateau = self.config.plateau_loss
        return self._curve_steps(
            variant,
            lambda s, v: study_stats.plateau_exit_step(s, v, plateau),
        )

    def plateau(self):
        """Which variants leave the unigram plateau, in how many seeds."""
        threshold = self.config.plateau_loss - study_stats.PLATEAU_MARGIN
        exits = {v: self._exits(v) for v in self.order}
        leaving = sorted(
            (v for v in self.order if any(exits[v])),
            key=lambda v: _sort_key(exits[v]),
        )
        staying = [v for v in self.order if not any(exits[v])]
        parts = [
            f"`{v}` in {_reached(exits[v])} "
            f"({_event_steps(exits[v], self.budget)})"
            for v in leaving
        ]
        text = (
            "**Off the unigram plateau** (validation loss below "
            f"{threshold:g} within {self.budget:,} steps): "
            + ("; ".join(parts) or "no variant")
        )
        if staying:
            seeds = _seeds_text([len(exits[v]) for v in staying])
            text += f"; in no seed ({seeds}): {names(staying)}"
        return text + "."

    def final_loss(self):
        """Each variant's final loss against the reference's."""
        reference = self.summary.get(REFERENCE)
        if not reference:
            return ""
        groups = {}
        for variant in self.order:
            if variant == REFERENCE:
                continue
            verdict = study_stats.compare_to(
                self.summary[variant]["final"], reference["final"], True
            )
            verdict = {"better": "lower", "worse": "higher"}.get(
                verdict, verdict
            )
            groups.setdefault(verdict, []).append(variant)
        rank = {"lower": 0, "no difference": 1, "higher": 2}
        parts = []
        for verdict, variants in sorted(
            groups.items(), key=lambda kv: (rank.get(kv[0], 3), kv[0])
        ):
            variants.sort(key=lambda v: self.summary[v]["final"]["median"])
            if verdict == "no difference":
                parts.append(f"no difference for {names(variants)}")
                continue
            cells = [
                f"`{v}` {study_stats.format_spread(self.summary[v]['final'])}"
                + (f" at step {self._reach(v)}" if verdict == "lower" else "")
                for v in variants
            ]
            if verdict == "lower":
                verdict += f", with the step each reaches `{REFERENCE}`'s,"
            parts.append(f"{verdict} for " + ", ".join(cells))
        counts = [len(self.runs[v]) for v in self.order]
        return (
            f"**Final validation loss** against `{REFERENCE}`'s "
            f"{study_stats.format_spread(reference['final'])} "
            f"({_seeds_text(counts)}; different where the min-max intervals "
            "do not overlap): " + "; ".join(parts) + "."
        )

    def _reach(self, variant):
        """Steps to the reference's final loss (median [min, max])."""
        target = self.summary[REFERENCE]["final"]["median"]
        steps = self._curve_steps(
            variant,
            lambda s, v: study_stats.first_step_at_or_below(s, v, target),
        )
        return _steps_text(steps, self.budget)

    def parting(self):
        """When each variant's curve leaves `nope`'s at the same seed."""
        if NO_POSITIONS not in self.runs:
            return ""
        base = self.runs[NO_POSITIONS]
        first = min(s for run in base.values() for s in run["curve"]["steps"])
        groups = {"never": [], "first": [], "later": []}
        steps = {}
        for variant in self.order:
            if variant == NO_POSITIONS:
                continue
            seeds = sorted(set(self.runs[variant]) & set(base))
            steps[variant] = [
                self._parting_step(variant, seed, base[seed]) for seed in seeds
            ]
            if not any(steps[variant]):
                groups["never"].append(variant)
            elif all(s == first for s in steps[variant]):
                groups["first"].append(variant)
            else:
                groups["later"].append(variant)
        later = sorted(groups["later"], key=lambda v: _sort_key(steps[v]))
        counts = [len(steps[v]) for v in steps]
        text = (
            "**Same seed, same curve until positions matter**: the first "
            f"evaluated step where a curve is more than {PARTING_TOLERANCE:g} "
            f"from `{NO_POSITIONS}`'s at the same seed ({_seeds_text(counts)}): "
            + ", ".join(
                f"`{v}` {_steps_text(steps[v], self.budget)}" for v in later
            )
        )
        if groups["first"]:
            text += f"; from the first evaluation: {names(groups['first'])}"
        if groups["never"]:
            text += (
                f"; never within {self.budget:,} steps: "
                f"{names(groups['never'])}"
            )
        return text + "."

    def _parting_step(self, variant, seed, base):
        curve = self.runs[variant][seed]["curve"]
        theirs = dict(zip(base["curve"]["steps"], base["curve"]["val_loss"]))
        for step, loss in zip(curve["steps"], curve["val_loss"]):
            if step in theirs and abs(loss - theirs[step]) > PARTING_TOLERANCE:
                return step
        return None

    def _length_gaps(self, runs, key=None):
        """Per seed: loss at the longest length it has minus at the
        trained length; `key` reads a rope scaling's losses instead."""
        short = str(self.config.pretrain.seq_length)
        gaps, longest = [], None
        for run in runs:
            losses = run["heldout_loss_by_length"]
            scaled = run[key[0]][key[1]] if key else losses
            longest = max(scaled, key=int)
            gaps.append(scaled[longest] - losses[short])
        return gaps, longest

    def lengths(self):
        """How much each variant loses at its longest evaluated length."""
        rows = []
        for variant in self.order:
            runs = list(self.runs[variant].values())
            gaps, longest = self._length_gaps(runs)
            rows.append((f"`{variant}`", gaps, longest))
            scaled = [r for r in runs if study_beyond_table.SCALED_KEY in r]
            for scaling in (
                sorted(scaled[0][study_beyond_table.SCALED_KEY])
                if scaled
                else []
            ):
                gaps, longest = self._length_gaps(
                    scaled, (study_beyond_table.SCALED_KEY, scaling)
                )
                rows.append((f"`{variant}` with {scaling}", gaps, longest))
        rows.sort(key=lambda row: study_stats.spread(row[1])["median"])
        counts = [len(self.runs[v]) for v in self.order]
        return (
            "**Longer inputs**: held-out loss at the longest length a model "
            "runs (the tables' end, or past it for the length-free options) "
            f"minus at the trained {self.config.pretrain.seq_length}, per "
            f"seed ({_seeds_text(counts)}): "
            + ", ".join(
                f"{name} {_spread(gaps, signed=True)} at {longest}"
                for name, gaps, longest in rows
            )
            + "."
        )

    def _glue_verdicts(self, glue):
        """`{verdict: {task: [variant]}}` against the control."""
        verdicts = {}
        for task, rows in glue.items():
            control = rows.get(CONTROL)
            for variant, row in rows.items():
                if variant == CONTROL or not control:
                    continue
                verdict = study_stats.compare_to(
                    row["score"], control["score"], False
                )
                verdicts.setdefault(verdict, {}).setdefault(task, [])
                verdicts[verdict][task].append(variant)
        return verdicts

    def _glue_outcome(self, glue, control="the control"):
        """How the fine-tuned variants of `glue` compare to the control."""
        verdicts = self._glue_verdicts(glue)
        tuned = {
            v
            for tasks in verdicts.values()
            for vs in tasks.values()
            for v in vs
        }
        count = f"{len(tuned)} variants fine-tuned"
        differing = sorted(v for v in verdicts if v != "no difference")
        if not differing:
            return f"none of the {count} differs from {control} on any task"
        return (
            "; ".join(
                f"{verdict} than {control} on "
                + "; on ".join(
                    f"{task_name(task)}: {names(variants)}"
                    for task, variants in verdicts[verdict].items()
                )
                for verdict in differing
            )
            + f" (of the {count}; every other pair: no difference)"
        )

    def glue_answer(self):
        """The GLUE rows against the no-pre-training control."""
        if not self.glue:
            return ""
        tuned = [
            v
            for v in self.order
            if any(v in rows for rows in self.glue.values())
        ]
        untuned = [v for v in self.order if v not in tuned]
        finetune = self.config.finetune
        rates = ", ".join(f"{lr:g}" for lr in finetune.learning_rates)
        seeds = ", ".join(str(s) for s in finetune.seeds)
        models = ", ".join(
            str(s) for s in self.config.fine_tuned_pretrain_seeds
        )
        control = "; ".join(
            f"{task_name(task)} "
            f"{study_stats.format_spread(rows[CONTROL]['score'])}"
            for task, rows in self.glue.items()
            if CONTROL in rows
        )
        text = (
            f"**GLUE** ({' and '.join(map(task_name, self.glue))} dev, "
            f"median [min, max] over fine-tuning seeds {seeds} of each "
            f"variant's seed-{models} model, learning rate {rates}): "
            f"{self._glue_outcome(self.glue, 'the no-pre-training control')}"
            f" ({control})"
        )
        if untuned:
            text += f"; not fine-tuned: {names(untuned)}"
        return text + "."

    def glue_views(self):
        """The GLUE outcome under the other selections on record."""
        parts = []
        for title, view in other_glue_selections(self.config, self.finetune):
            glue = study_summary.glue_summary(view, self.finetune, self.order)
            parts.append(f"{title}: {self._glue_outcome(glue)}")
        if not parts:
            return ""
        return (
            "**GLUE, other selections** ([`glue_other_selections.md`]"
            "(glue_other_selections.md)): " + "; ".join(parts) + "."
        )

    def _extension_rows(self):
        rows = study_extension.summarize(
            self.config, self.extensions, self.pretrain, self.order
        )
        steps = max((row["steps"] for row in rows), default=None)
        return [row for row in rows if row["steps"] == steps]

    def _extension_group(self, row, base):
        """Which of `EXTENSION_GROUPS` a variant's extension falls in."""
        if base and round(row["after"]["median"], 3) < round(
            base["after"]["median"], 3
        ):
            return "below"
        short = str(self.config.pretrain.seq_length)
        long = str(self.config.extension_length)
        narrowed = sum(
            after < before
            for before, after in (
                study_extension.gaps(r, short, long) for r in self._records(row)
            )
        )
        if narrowed == len(row["seeds"]):
            return "every"
        return "some" if narrowed else "none"

    def extension(self):
        """Which variants narrow their length gap in the second phase."""
        rows = self._extension_rows()
        if not rows:
            return ""
        short = self.config.pretrain.seq_length
        long = self.config.extension_length
        base = next((r for r in rows if r["variant"] == NO_POSITIONS), None)
        counts = [len(row["seeds"]) for row in rows]

        mixed = min(counts) != max(counts)

        def gap(row):
            before = study_stats.format_spread(row["before"], signed=True)
            after = study_stats.format_spread(row["after"], signed=True)
            return f"{before} -> {after}"

        def name(row):
            """The variant, with its seed count where the counts differ."""
            if not mixed:
                return f"`{row['variant']}`"
            count = len(row["seeds"])
            return f"`{row['variant']}` ({count} seed{'s' * (count > 1)})"

        groups = {}
        for row in rows:
            if row is not base:
                group = self._extension_group(row, base)
                groups.setdefault(group, []).append(row)
        parts = [
            EXTENSION_GROUPS[group].format(base=NO_POSITIONS)
            + ": "
            + ", ".join(
                f"{name(r)} {gap(r)}"
                for r in sorted(
                    groups[group], key=lambda r: r["after"]["median"]
                )
            )
            for group in EXTENSION_GROUPS
            if group in groups
        ]
        off = [
            f"`{row['variant']}` "
            + ",".join(
                str(s) for s in row["seeds"] if s not in row["on_plateau"]
            )
            for row in rows
            if len(row["on_plateau"]) < len(row["seeds"])
        ]
        one_seed = max(counts) == 1
        text = (
            f"**Context extension** {short} -> {long} by {rows[0]['steps']} "
            f"more steps (`extend/`, {_seeds_text(counts)}"
            + (": no spread to judge the differences by" if one_seed else "")
            + f"): the gap, loss at {long} minus loss at {short}, before -> after"
            + ("" if one_seed else ", median [min, max] over seeds")
        )
        if base:
            text += f"; {name(base)} (no positions) {gap(base)}"
        return (
            text
            + "; "
            + "; ".join(parts)
            + ". Extended seeds whose pre-training left the plateau: "
            + (
                ", ".join(off) + "; every other one never left it."
                if off
                else "none."
            )
        )

    def _records(self, row):
        return [
            r
            for r in self.extensions
            if r["variant"] == row["variant"]
            and r["num_train_steps"] == row["steps"]
        ]

    def reproducibility(self):
        """How well the pre-trainings run again reproduce their records."""
        recorded = {(r["variant"], r["seed"]): r for r in self.pretrain}
        pairs = [
            (recorded[(r["variant"], r["seed"])], r)
            for r in self.reruns
            if (r["variant"], r["seed"]) in recorded
        ]
        if not pairs:
            return (
                "No pre-training has been run again with its record kept "
                "(`rerun/`), so none of the records is checked for "
                "reproducibility yet."
            )
        final = max(
            abs(a["final_val_loss"] - b["final_val_loss"]) for a, b in pairs
        )
        heldout = max(
            abs(a["heldout_loss_by_length"][n] - b["heldout_loss_by_length"][n])
            for a, b in pairs
            for n in a["heldout_loss_by_length"]
            if n in b["heldout_loss_by_length"]
        )
        if len(pairs) == 1:
            runs = "1 pre-training run again (its model was not on the "
            runs += "machine; `rerun/`) reproduces its record's"
        else:
            runs = f"{len(pairs)} pre-trainings run again (their models were "
            runs += "not on the machine; `rerun/`) reproduce their records'"
        return (
            f"{runs} final validation loss to {final:.1e} and held-out "
            f"losses to {heldout:.1e}."
        )

    def readme(self):
        """One paragraph for the README."""
        exits = {v: self._exits(v) for v in self.order}
        leaving = sorted(
            (v for v in self.order if any(exits[v])),
            key=lambda v: _sort_key(exits[v]),
        )
        model = self.config.pretrain.model.dims()
        lengths = self.config.eval_lengths + self.config.beyond_table_lengths
        short = self.config.pretrain.seq_length
        counts = [len(self.runs[v]) for v in self.order]
        leave = join(
            f"`{v}` ({_reached(exits[v]).split(' seeds')[0]})" for v in leaving
        )
        text = (
            f"At this scale ({model['num_layers']} layers, length {short}, "
            f"{self.budget:,} steps, {_seeds_text(counts)}) "
            f"{leave or 'no variant'} leave the unigram plateau"
        )
        if REFERENCE in exits and REFERENCE not in leaving:
            text += (
                f" and `{REFERENCE}` (0 of {len(exits[REFERENCE])}) does not"
            )
        reference = self.summary.get(REFERENCE)
        if reference:
            same = [
                v
                for v in self.order
                if v != REFERENCE
                and study_stats.compare_to(
                    self.summary[v]["final"], reference["final"], True
                )
                == "no difference"
            ]
            text += (
                f"; the final loss of {names(same)} shows no difference from "
                f"`{REFERENCE}`'s"
            )
        if self.glue:
            tasks = " and ".join(map(task_name, self.glue))
            outcome = self._glue_outcome(
                self.glue, "a model fine-tuned without pre-training"
            )
            text += f"; on GLUE ({tasks}) {outcome}"
        text += (
            f". The study also measures held-out loss at "
            f"{min(lengths[1:]) // short}x-{max(lengths) // short}x the "
            "trained length"
        )
        rows = self._extension_rows()
        if rows:
            text += (
                f" and a context extension to {self.config.extension_length // short}x "
                f"({_seeds_text([len(r['seeds']) for r in rows])})"
            )
        return text + "."

    def blocks(self):
        """`{block name: markdown}` (see `BLOCKS`); `{}` before any
        pre-training is on record."""
        if not self.order:
            return {}
        answer = [
            self.plateau(),
            self.final_loss(),
            self.glue_answer(),
            self.extension(),
        ]
        details = [self.parting(), self.lengths(), self.glue_views()]
        return {
            "answer": _bullets(answer),
            "details": _bullets(details),
            "reproducibility": _wrap(self.reproducibility()),
            "readme": _wrap(self.readme()),
        }


def _wrap(text, first="", then=""):
    """`text` in lines of at most `WIDTH` characters (names whole)."""
    return textwrap.fill(
        text,
        WIDTH,
        initial_indent=first,
        subsequent_indent=then,
        break_long_words=False,
        break_on_hyphens=False,
    )


def _bullets(texts):
    return "\n".join(_wrap(t, "- ", "  ") for t in texts if t)


def other_glue_selections(config, finetune):
    """`[(title, config)]`: the GLUE selections on record other than the
    configured one (every learning rate; every pre-training seed)."""
    recipe = config.glue_recipe()
    runs = [r for r in finetune if r["recipe"] == recipe]
    rates = sorted({r["learning_rate"] for r in runs})
    seeds = sorted(
        {r["pretrain_seed"] for r in runs if r["variant"] != CONTROL}
    )
    views = []
    if rates != sorted(config.finetune.learning_rates):
        views.append(
            (
                "each row at the better median of the rates "
                + " and ".join(f"{lr:g}" for lr in rates),
                config.replace(finetune=dict(learning_rates=rates)),
            )
        )
    if seeds != sorted(config.fine_tuned_pretrain_seeds):
        views.append(
            (
                "pooled over the models of pre-training seeds "
                + ", ".join(str(s) for s in seeds)
                + " where fine-tuned",
                config.replace(glue_pretrain_seeds=seeds),
            )
        )
    return views


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
        begin, end = _marker(study, "answer")
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
