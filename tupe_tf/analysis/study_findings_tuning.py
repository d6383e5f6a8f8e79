"""The study's findings of fine-tuning and context extension.

`TuningFindings` is the half of `study_findings.Findings` that reads the
GLUE fine-tunings against the no-pre-training control (`glue_answer`,
`glue_views`, with `other_glue_selections`) and the second, longer phase
of pre-training (`extension`), each comparison by the rule of
`paired_stats`. It reads what `Findings` sets: `config`, `pretrain`,
`finetune`, `extensions`, `glue` (the configured selection's
`study_summary.glue_summary`) and `order` (the pre-trained variants).
"""

from tupe_tf.analysis import paired_stats
from tupe_tf.analysis import study_extension
from tupe_tf.analysis import study_stats
from tupe_tf.analysis import study_summary
from tupe_tf.analysis.study_config import CONTROL
from tupe_tf.analysis.study_findings_markdown import called
from tupe_tf.analysis.study_findings_markdown import differences
from tupe_tf.analysis.study_findings_markdown import evaluation_name
from tupe_tf.analysis.study_findings_markdown import join
from tupe_tf.analysis.study_findings_markdown import names
from tupe_tf.analysis.study_findings_markdown import seeds_text
from tupe_tf.analysis.study_findings_markdown import task_name


class TuningFindings:
    """GLUE and context-extension findings (a base of
    `study_findings.Findings`, which sets the attributes they read)."""

    def _glue_outcome(self, glue, control="the control", lowest=False):
        """How the fine-tuned variants of `glue` compare to the control:
        which the rule calls different, and with `lowest` the rows of the
        smallest p with their differences."""
        versus = {
            (task, v): row["versus"]
            for task, rows in glue.items()
            for v, row in rows.items()
            if v != CONTROL and row.get("versus")
        }
        text = called(
            {(task_name(t), v): c for (t, v), c in versus.items()},
            against=f" from {control}",
            name=lambda key: f"{key[0]} `{key[1]}`",
        )
        smallest = min((c.p for c in versus.values()), default=1.0)
        if not lowest or smallest >= 1.0:
            return text
        parts = []
        for task in glue:
            rows = {
                v: c
                for (t, v), c in versus.items()
                if t == task and c.p == smallest
            }
            if rows:
                parts.append(f"{task_name(task)} {differences(rows)}")
        return text + f"; the lowest p, {smallest:.2g}: " + "; ".join(parts)

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
        files = join(f"the {evaluation_name(task)}" for task in self.glue)
        text = (
            f"**GLUE** (scored on {files}; each "
            f"variant's seed-{models} model fine-tuned with seeds {seeds} at "
            f"learning rate {rates}, minus the no-pre-training control at "
            f"the same fine-tuning seed; the control: {control}): "
            + self._glue_outcome(self.glue, lowest=True)
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

    def extension_rows(self):
        """The `study_extension.summarize` rows of the longest second
        phase on record (`[]` without extension records)."""
        rows = study_extension.summarize(
            self.config, self.extensions, self.pretrain, self.order
        )
        steps = max((row["steps"] for row in rows), default=None)
        return [row for row in rows if row["steps"] == steps]

    def extension(self):
        """How the second phase changes each variant's length gap."""
        rows = self.extension_rows()
        if not rows:
            return ""
        short = self.config.pretrain.seq_length
        long = self.config.extension_length
        counts = [len(row["seeds"]) for row in rows]
        versus = {
            row["variant"]: row["change"]
            for row in sorted(rows, key=lambda r: r["change"].mean)
        }

        def name(variant):
            """The variant, with its seed count where the counts differ."""
            if min(counts) == max(counts):
                return f"`{variant}`"
            count = versus[variant].n
            return f"`{variant}` ({count} seed{'s' * (count > 1)})"

        return (
            f"**Context extension** {short} -> {long} by {rows[0]['steps']} "
            f"more steps (`extend/`, {seeds_text(counts)}): the gap, loss at "
            f"{long} minus at {short}, after the second phase minus before "
            "it at the same seed: "
            + ", ".join(
                f"{name(v)} {paired_stats.format_difference(c)}"
                for v, c in versus.items()
            )
            + "; "
            + called(versus)
            + "."
        )


def other_glue_selections(config, finetune):
    """`[(title, config)]`: the GLUE selections on record other than the
    configured one: each learning rate on its own (no rate is chosen per
    row: the records' only score is the reported evaluation file's), and
    every pre-training seed."""
    recipe = config.glue_recipe()
    runs = [r for r in finetune if r["recipe"] == recipe]
    rates = sorted({r["learning_rate"] for r in runs})
    seeds = sorted(
        {r["pretrain_seed"] for r in runs if r["variant"] != CONTROL}
    )
    views = []
    for rate in rates:
        if [rate] == list(config.finetune.learning_rates):
            continue
        models = {
            (r["variant"], r["pretrain_seed"])
            for r in runs
            if r["learning_rate"] == rate
            and (
                r["variant"] == CONTROL
                or r["pretrain_seed"] in config.fine_tuned_pretrain_seeds
            )
        }
        views.append(
            (
                f"every row at learning rate {rate:g} (the {len(models)} "
                "models fine-tuned at it)",
                config.replace(finetune=dict(learning_rates=[rate])),
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
