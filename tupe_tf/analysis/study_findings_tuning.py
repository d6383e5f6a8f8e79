"""The study's findings of fine-tuning and context extension.

`TuningFindings` is the half of `study_findings.Findings` that reads the
GLUE fine-tunings against the no-pre-training control (`glue_answer`,
`glue_views`, with `other_glue_selections`) and the second, longer phase
of pre-training (`extension`). It reads what `Findings` sets: `config`,
`pretrain`, `finetune`, `extensions`, `glue` (the configured selection's
`study_summary.glue_summary`) and `order` (the pre-trained variants).
"""

from tupe_tf.analysis import study_extension
from tupe_tf.analysis import study_stats
from tupe_tf.analysis import study_summary
from tupe_tf.analysis.study_config import CONTROL
from tupe_tf.analysis.study_config import NO_POSITIONS
from tupe_tf.analysis.study_findings_markdown import names
from tupe_tf.analysis.study_findings_markdown import seeds_text
from tupe_tf.analysis.study_findings_markdown import task_name

# The extension's groups of variants, in the order the text gives them.
EXTENSION_GROUPS = {
    "below": "below `{base}`'s after it",
    "every": "narrowed in every seed",
    "some": "narrowed in some seeds",
    "none": "not narrowed",
}


class TuningFindings:
    """GLUE and context-extension findings (a base of
    `study_findings.Findings`, which sets the attributes they read)."""

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
            f"more steps (`extend/`, {seeds_text(counts)}"
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
