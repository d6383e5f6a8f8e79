r"""The position probes of every encoding (resumable).

    mkdir -p runs && nohup nice -n 10 python scripts/probe.py \
        --results_dir=docs/results > runs/probes.log 2>&1 &

Trains one small model from scratch per (task, variant, seed) on the
probes of `tupe_tf.analysis.probe_tasks` (copy, order, distance, passkey)
and scores it at the training length and at 2x, 4x and 8x it; one JSON
record per run under `<results_dir>/probes_len<L>/probes/<task>/`. Rerun the
same command to resume: finished records are skipped. `--from_results`
only prints the tables of the records. Flags:
`tupe_tf.analysis.probe_config.ProbeConfig`.
"""

import os

# TensorFlow reads this as it loads, with the imports below: no C++ INFO,
# WARNING or ERROR lines unless the user sets it.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from tupe_tf.analysis import probe_report  # noqa: E402
from tupe_tf.analysis import probe_runner  # noqa: E402
from tupe_tf.analysis.probe_config import ProbeConfig  # noqa: E402
from tupe_tf.utils import cli  # noqa: E402
from tupe_tf.utils import config_flags  # noqa: E402

config_flags.define_flags(ProbeConfig)


def probe_or_report(config):
    """Runs (or, with --from_results, only reports) the probes of `config`."""
    if config.from_results:
        config.validate()
        records = probe_runner.load_records(config)
        result = {"new_runs": 0, "records": records, "wall_seconds": 0.0}
    else:
        result = probe_runner.run_probes(config)
    result["report"] = probe_report.write_report(
        config.study_results_dir, result["records"]
    )
    return result


def print_result(result):
    print(probe_report.tables(result["records"]), flush=True)
    print(f"[probe] wrote {result['report']}", flush=True)
    print(
        f"[probe] {result['new_runs']} new runs in "
        f"{result['wall_seconds'] / 60:.1f} min; "
        f"{len(result['records'])} records",
        flush=True,
    )


def main(argv):
    del argv  # cli.run refuses arguments that are not flags.
    config = config_flags.config_from_flags(ProbeConfig)
    return cli.run_main(probe_or_report, config, print_result)


if __name__ == "__main__":
    cli.run(main)
