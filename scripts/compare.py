r"""The comparison study of every position encoding (resumable).

    nohup nice -n 10 python scripts/compare.py --glue_dir=data/glue \
        --output_dir=runs/study > runs/study.log 2>&1 &

Runs what is missing of the study (see `tupe_tf.analysis.compare`), one JSON
file per run under `<results_dir>/<study name>/`, and rewrites the tables
and figures after every run; models, results and figures all go under
`--output_dir` unless `--results_dir`/`--figures_dir` say otherwise (the
project's own study: `--results_dir=docs/results
--figures_dir=docs/figures/compare`). Rerun the same command to resume; add
seeds with `--seeds`/`--other_seeds`/`--glue_seeds`. `--from_results` only
rebuilds the tables and figures from the JSON files (no training, no models
needed). Flags: `tupe_tf.analysis.study_config.CompareConfig`.
"""

import os

# TensorFlow reads this as it loads, with the imports below: no C++ INFO,
# WARNING or ERROR lines unless the user sets it.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from tupe_tf.analysis import compare  # noqa: E402
from tupe_tf.analysis.study_config import CompareConfig  # noqa: E402
from tupe_tf.utils import cli  # noqa: E402
from tupe_tf.utils import config_flags  # noqa: E402

config_flags.define_flags(CompareConfig)


def compare_or_report(config):
    """Runs (or, with --from_results, reports) the study of `config`."""
    if config.from_results:
        config.validate()
        return compare.report(config)
    return compare.run_comparison(config)


def print_result(result):
    print(result["tables"], flush=True)
    print(
        "[compare] the finished runs took "
        f"{result['total_wall_seconds'] / 60:.1f} min wall time, "
        f"{result['total_cpu_seconds'] / 60:.1f} min CPU time",
        flush=True,
    )


def main(argv):
    del argv  # cli.run refuses arguments that are not flags.
    config = config_flags.config_from_flags(CompareConfig)
    return cli.run_main(compare_or_report, config, print_result)


if __name__ == "__main__":
    cli.run(main)
