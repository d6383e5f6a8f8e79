r"""Gradient accumulation against the large batch: time per example, memory.

Each round runs, in a shuffled order, one fresh `scripts/pretrain.py`
process per case (the main job's model and data, `--num_train_steps`
steps):

  * `batch B`: `--global_batch_size=B`;
  * `batch B as k x B/k`: the same with `--gradient_accumulation_steps=k`
    (the same updates, memory of a `B/k` batch);
  * `batch B/k`: `--global_batch_size=B/k`, what the micro-batch alone
    costs.

A case's time per step is the median of its run's logged windows after
the first (`main_job.py`); per example it is that over the examples of a
step. Peak memory is the process's peak RSS. Ratios are per round, to
`batch B`.

  python benchmarks/gradient_accumulation.py --rounds=9

Prints a Markdown table and writes it, with the raw numbers, to --output.
"""

import statistics
import time

import harness
import main_job
from absl import app
from absl import flags

FLAGS = flags.FLAGS
flags.DEFINE_integer("batch_size", 256, "The large batch B.")
flags.DEFINE_integer("accumulation_steps", 4, "k.")
flags.adopt_module_key_flags(main_job)
flags.FLAGS.set_default("num_train_steps", 24)
flags.FLAGS.set_default("log_every", 4)
flags.FLAGS.set_default(
    "output", "benchmarks/results/gradient_accumulation.json"
)


def cases():
    """{name: (flags, examples per step)} of the three cases."""
    big, k = FLAGS.batch_size, FLAGS.accumulation_steps
    return {
        f"batch {big}": ([f"--global_batch_size={big}"], big),
        f"batch {big} as {k} x {big // k}": (
            [
                f"--global_batch_size={big}",
                f"--gradient_accumulation_steps={k}",
            ],
            big,
        ),
        f"batch {big // k}": ([f"--global_batch_size={big // k}"], big // k),
    }


def timed_case(name, extra_flags, examples):
    def unit():
        windows, child = main_job.pretrain_process(
            extra_flags, FLAGS.num_train_steps, FLAGS.log_every
        )
        main_job.record(name, windows, child)
        return harness.Timing(
            main_job.steady_step(windows) / examples,
            child.timing.cpu / FLAGS.num_train_steps / examples,
        )

    return unit


def table_rows(samples):
    reference = samples[next(iter(samples))]
    rows = []
    for name, timings in samples.items():
        summary = harness.summarize(timings, reference=reference)
        rss = [
            p["peak_rss_mb"] for p in main_job.PROCESSES if p["case"] == name
        ]
        rows.append(
            [
                name,
                summary.wall.map(lambda t: t * 1000).format(".2f"),
                summary.wall_ratio.format(".3f"),
                f"{statistics.median(rss):,.0f} [{min(rss):,.0f}, "
                f"{max(rss):,.0f}]",
            ]
        )
    return rows


def main(argv):
    del argv
    main_job.build_default_data()
    start = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    machine = harness.machine()
    samples = harness.run_rounds(
        {
            name: timed_case(name, extra, examples)
            for name, (extra, examples) in cases().items()
        },
        FLAGS.rounds,
    )
    table = harness.print_table(
        f"Gradient accumulation, the main job's model, length 128, "
        f"{FLAGS.num_train_steps} steps per process, {FLAGS.rounds} "
        f"interleaved rounds of fresh processes; {start}, {machine}",
        [
            "case",
            "ms per example, median [min, max]",
            "per-round ratio to the first row",
            "peak RSS MB, median [min, max]",
        ],
        table_rows(samples),
    )
    harness.write_json(
        FLAGS.output,
        samples,
        processes=main_job.PROCESSES,
        date=start,
        table=table,
    )


if __name__ == "__main__":
    app.run(main)
