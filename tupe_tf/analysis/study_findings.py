"""The study's findings in words, written from the per-run JSON files only.

Every number and every grouping of variants in these sentences is computed
from the records by the rules of the tables (`study_stats`: median [min,
max] over seeds, "no difference" where the min-max intervals overlap), with
the seed count it rests on; nothing is typed by hand. `Findings` gives
them as markdown blocks: the findings of pre-training (here) and those of
fine-tuning and context extension (`study_findings_tuning`), worded and
wrapped by `study_findings_markdown`. `study_report` writes them to
`findings.md` beside `tables.md`, and rewrites the blocks of them that
markdown files (the project's `README.md` and `docs/results.md`) carry
between markers (`--findings_docs`, `study_findings_markdown.updated_doc`);
tests/analysis/test_docs.py checks that those blocks follow from the
committed records.

Example:

>>> print(names(["rope", "shaw", "tupe-r"]))
`rope`, `shaw` and `tupe-r`
"""

import re

from tupe_tf.analysis import study_beyond_table
from tupe_tf.analysis import study_stats
from tupe_tf.analysis import study_summary
from tupe_tf.analysis.study_config import NO_POSITIONS
from tupe_tf.analysis.study_config import REFERENCE
from tupe_tf.analysis.study_findings_markdown import bullets
from tupe_tf.analysis.study_findings_markdown import join
from tupe_tf.analysis.study_findings_markdown import names
from tupe_tf.analysis.study_findings_markdown import seeds_text
from tupe_tf.analysis.study_findings_markdown import task_name
from tupe_tf.analysis.study_findings_markdown import wrap
from tupe_tf.analysis.study_findings_tuning import TuningFindings

# At a seed, the curves of the variants without input positions agree with
# the curve of `NO_POSITIONS` within PARTING_TOLERANCE until their positions
# matter.
PARTING_TOLERANCE = 0.005


def _spread(values, signed=False):
    return study_stats.format_spread(study_stats.spread(values), signed=signed)


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


def _sort_key(values):
    """Orders event steps: more seeds reaching, then the earlier median."""
    reached = sorted(v for v in values if v is not None)
    middle = reached[(len(reached) - 1) // 2] if reached else 0
    return (-len(reached), middle)


class Findings(TuningFindings):
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
            seeds = seeds_text([len(exits[v]) for v in staying])
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
            f"({seeds_text(counts)}; different where the min-max intervals "
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
            f"from `{NO_POSITIONS}`'s at the same seed ({seeds_text(counts)}): "
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
            f"seed ({seeds_text(counts)}): "
            + ", ".join(
                f"{name} {_spread(gaps, signed=True)} at {longest}"
                for name, gaps, longest in rows
            )
            + "."
        )

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
            f"{self.budget:,} steps, {seeds_text(counts)}) "
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
                f"({seeds_text([len(r['seeds']) for r in rows])})"
            )
        return text + "."

    def blocks(self):
        """`{block name: markdown}` (see `study_findings_markdown.BLOCKS`);
        `{}` before any pre-training is on record."""
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
            "answer": bullets(answer),
            "details": bullets(details),
            "reproducibility": wrap(self.reproducibility()),
            "readme": wrap(self.readme()),
        }
