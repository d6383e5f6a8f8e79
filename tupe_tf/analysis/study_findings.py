"""The study's findings in words, written from the per-run JSON files only.

Every number and every grouping of variants in these sentences is computed
from the records: spreads are median [min, max] over seeds
(`study_stats`), and every comparison between variants follows the one
rule of `paired_stats` (paired differences per seed, a paired t-test,
Holm over each family), with the seed count it rests on; nothing is
typed by hand. `Findings` gives them as markdown blocks: the findings of
pre-training (here) and those of fine-tuning and context extension
(`study_findings_tuning`), worded and wrapped by
`study_findings_markdown`, and the table to choose an encoding from, with
the position probes' records (`choice_table`, `choice_lines`). `study_report` writes them to `findings.md`
beside `tables.md`, and rewrites the blocks of them that markdown files
(the project's `README.md` and `docs/results.md`) carry between markers
(`--findings_docs`, `study_findings_markdown.updated_doc`);
tests/analysis/test_docs.py checks that those blocks follow from the
committed records.

Example:

>>> from tupe_tf.analysis.study_config import CompareConfig
>>> Findings(CompareConfig(), [], [], [], [], ["bert"]).blocks()
{}
"""

from tupe_tf.analysis import choice_lines
from tupe_tf.analysis import choice_table
from tupe_tf.analysis import paired_stats
from tupe_tf.analysis import study_beyond_table
from tupe_tf.analysis import study_stats
from tupe_tf.analysis import study_summary
from tupe_tf.analysis.study_config import NO_POSITIONS
from tupe_tf.analysis.study_config import REFERENCE
from tupe_tf.analysis.study_findings_markdown import bullets
from tupe_tf.analysis.study_findings_markdown import called
from tupe_tf.analysis.study_findings_markdown import differences
from tupe_tf.analysis.study_findings_markdown import seeds_text
from tupe_tf.analysis.study_findings_markdown import wrap
from tupe_tf.analysis.study_findings_tuning import TuningFindings


def _spread(values, signed=False):
    return study_stats.format_spread(study_stats.spread(values), signed=signed)


class Findings(TuningFindings):
    """The findings of one study's records.

    Args:
        config: the `CompareConfig` (its thresholds, budget and the GLUE
            selection).
        pretrain, finetune, extensions, reruns: the finished-run dicts
            (`study_records.load_kind`).
        order: the variants in table order.
        probes: the records of the position probes (`choice_table`'s
            probe columns; none: no such columns).
    """

    def __init__(
        self, config, pretrain, finetune, extensions, reruns, order, probes=()
    ):
        self.config = config
        self.probes = list(probes)
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

    def _versus(self, baseline):
        """`{variant: Paired}` against `baseline`, by the mean difference."""
        versus = {
            v: self.summary[v]["versus"][baseline]
            for v in self.order
            if v != baseline and self.summary[v]["versus"][baseline]
        }
        return dict(sorted(versus.items(), key=lambda kv: kv[1].mean))

    def rule(self):
        """The decision rule and its assumption, on the study's seeds."""
        n = max(len(runs) for runs in self.runs.values())
        return (
            "**Rule**: two variants are compared by their differences at "
            "the same seed, mean [min, max] over seeds; they differ where a "
            "paired t-test of the mean difference (two-sided, n - 1 degrees "
            "of freedom), Holm-corrected over its family, gives p <= "
            f"{paired_stats.ALPHA:g}. The t-test assumes roughly normal "
            f"per-seed differences, which {n} seed{'s' if n > 1 else ''} "
            "cannot check: the min-max beside each difference shows their "
            "spread"
            + ("; one seed gives no conclusion (p = 1)." if n < 2 else ".")
        )

    def positions(self):
        """Each variant's final loss against the bag-of-words level, and
        the first step it is below it by the rule."""
        if NO_POSITIONS not in self.summary:
            return ""
        versus = self._versus(NO_POSITIONS)
        first = study_summary.first_steps_below(self.pretrain, self.order)
        below = [f"`{v}` step {s:,}" for v, s in first.items() if s]
        counts = [len(self.runs[v]) for v in self.order]
        return (
            f"**Uses positions**: final validation loss minus `{NO_POSITIONS}`'s "
            f"at the same seed ({seeds_text(counts)}), `{NO_POSITIONS}`'s "
            "being the bag-of-words level (without positions every `[MASK]` "
            "of a sequence gets one prediction): "
            + differences(versus)
            + (
                "; first below it by the rule: " + ", ".join(below)
                if below
                else "; below it by the rule at no evaluated step"
            )
            + f" (every {self.config.eval_interval} steps); at the last, "
            + called(versus)
            + "."
        )

    def final_loss(self):
        """Each variant's final loss against the reference's."""
        reference = self.summary.get(REFERENCE)
        if not reference:
            return ""
        versus = self._versus(REFERENCE)
        counts = [len(self.runs[v]) for v in self.order]
        return (
            f"**Final validation loss** minus `{REFERENCE}`'s "
            f"({study_stats.format_spread(reference['final'])}) at the same "
            f"seed ({seeds_text(counts)}): "
            + differences(versus)
            + "; "
            + called(versus)
            + "."
        )

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

    def readme(self, found):
        """The README's summary: the scale, and the choices the rule
        supports (`choice_lines.summary` of the columns `found`)."""
        model = self.config.pretrain.model.dims()
        counts = [len(self.runs[v]) for v in self.order]
        return (
            f"At this scale ({model['num_layers']} layers, length "
            f"{self.config.pretrain.seq_length}, {self.budget:,} steps, "
            f"{seeds_text(counts)}), the study's rule (a paired t-test of the "
            "per-seed differences, Holm-corrected) "
            + choice_lines.summary(found)
            + "."
        )

    def blocks(self):
        """`{block name: markdown}` (see `study_findings_markdown.BLOCKS`);
        `{}` before any pre-training is on record."""
        if not self.order:
            return {}
        answer = [
            self.rule(),
            self.positions(),
            self.final_loss(),
            self.glue_answer(),
            self.extension(),
        ]
        details = [self.lengths(), self.glue_views()]
        found = choice_table.columns(self, self.probes)
        return {
            "choice": choice_lines.block(self, self.probes, found),
            "answer": bullets(answer),
            "details": bullets(details),
            "reproducibility": wrap(self.reproducibility()),
            "readme": wrap(self.readme(found)),
        }
