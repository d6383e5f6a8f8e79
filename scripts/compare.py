r"""The comparison study of every position encoding (resumable).

    nohup nice -n 10 python scripts/compare.py \
        --glue_dir=/work/shared/data/glue > runs/study.log 2>&1 &

Runs what is missing of the study (see `tupe_tf.analysis.compare`), one JSON
file per run under `<results_dir>/<name>/`, and rewrites the tables and
figures after every run. Rerun the same command to resume; add seeds with
`--seeds`/`--other_seeds`/`--glue_seeds`. `--from_results` only rebuilds
the tables and figures from the JSON files (no training, no models needed).
Flags: `tupe_tf.analysis.compare.CompareConfig`.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app  # noqa: E402

from data_pipeline import config_flags  # noqa: E402
from tupe_tf.analysis import compare  # noqa: E402

config_flags.define_flags(compare.CompareConfig)


def main(argv):
    del argv
    config = config_flags.validated_config_from_flags(compare.CompareConfig)
    try:
        if config.from_results:
            result = compare.report(config)
        else:
            result = compare.run_comparison(config, max_runs=config.max_runs)
    except ValueError as error:
        raise app.UsageError(str(error)) from error
    print(result["tables"], flush=True)
    print(
        "[compare] the finished runs took "
        f"{result['total_wall_seconds'] / 60:.1f} min wall time, "
        f"{result['total_cpu_seconds'] / 60:.1f} min CPU time",
        flush=True,
    )


if __name__ == "__main__":
    app.run(main)
