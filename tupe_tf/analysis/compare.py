"""The comparison study: every position encoding, several seeds, resumable.

Each (variant, seed) pre-training and each fine-tuning run writes its own
small JSON file under `<results_dir>/<study name>/`; a rerun skips the runs
whose file exists, so the study can be stopped and extended run by run
(`seeds`, `other_seeds`, `glue_seeds`). Models go under `output_dir` and
are not needed to rebuild the tables, findings and figures: `report` reads
only the JSON files (`scripts/compare.py --from_results`). By default the results
and figures go under `output_dir` too.

The study is split by step; this module is its public entry:

- `study_config`: `CompareConfig` (the settings, one flag each) and the
  variants;
- `study_plan`: the runs in the order they run (`plan_runs`) and their
  paths;
- `study_runner`: pre-training and fine-tuning runs (`run_comparison`);
- `study_records`: the per-run JSON files and the settings and data
  they must share;
- `study_report`: markdown tables, findings and figures (`report`);
- `study_summary`, `study_findings`: the spreads over seeds the tables
  and the findings are written from, and the findings in words (of
  fine-tuning and extension: `study_findings_tuning`; their wording and
  the documents' blocks: `study_findings_markdown`); the table to choose
  an encoding from, with the position probes' records, and its lines:
  `choice_table`, `choice_lines`;
- `study_extension`: the context extension runs and their table;
- `study_data`, `study_stats`, `paired_stats`, `study_figures`: the
  held-out split, the spreads over seeds, the one rule every comparison
  between variants follows, and the figures.

Example:

>>> config = CompareConfig(seeds=(0,), other_seeds=(0,))
>>> [run.key for run in plan_runs(config)][:2]
['pretrain/bert__seed0', 'pretrain/tupe-r__seed0']
"""

from tupe_tf.analysis.study_config import CompareConfig
from tupe_tf.analysis.study_plan import plan_runs
from tupe_tf.analysis.study_report import report
from tupe_tf.analysis.study_runner import run_comparison

__all__ = ["CompareConfig", "plan_runs", "report", "run_comparison"]
