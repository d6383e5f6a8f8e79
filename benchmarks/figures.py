"""The figures docs/benchmarks.md shows, each computed from its raw file.

`figure_functions()` maps the name of a raw file in benchmarks/results/ to
a function of its path returning `Figures`: the table the page shows
(verbatim) and the phrases of the text around it (settings, load, date,
findings), all computed from the file. tests/utils/test_benchmark_figures.py
checks that the page holds each of them and no number typed by hand. After
a re-run, paste what this prints:

    python benchmarks/figures.py benchmarks/results/<raw file>

Here: the JSON records (`harness.write_json`) of training and models;
data_figures.py: those of the data pipeline; printed_figures.py: the older
runs' printed output (.txt). `runtime_latency.py --table_from` prints its
own table.
"""

import dataclasses
import json
import os
import re
import statistics
import sys

import harness
from harness import Spread
from harness import Timing
from harness import percent

from tupe_tf.training.config import PAPER_FINETUNE_RECIPE
from tupe_tf.utils.backbone_options import MODEL_SIZES

# The targets the text measures against (the issues' goals, not results).
MAIN_JOB_TARGET = 1.1  # the main job's step time over plain keras-hub's
SHARD_TARGET = 10  # tupe-tf's shard building over Model Garden's, wall
SHARD_MEMORY_TARGET_MB = 1024
VOCAB_TARGET = 10  # tokenizers over TF-Text, per CPU-second
READER_TARGET = 3000  # sequences per second on 2 cores
WHOLE_WORD_TARGET = 0.10  # whole-word static masking's extra time
EXPORT_TARGET = 0.03  # an exported encoding's extra latency over bert's
MFU_GOAL = 40  # percent, the GPU pre-training step


@dataclasses.dataclass(frozen=True)
class Figures:
    """A raw file's table (None: its figures are all in the text) and the
    phrases of the text around it."""

    table: str = None
    phrases: tuple = ()


def read(path):
    with open(path) as f:
        return f.read()


def read_json(path):
    return json.loads(read(path))


def day(date):
    """'2026-11-26' of a recorded date ('2026-11-26 14:44 UTC')."""
    return date[:10]


def table(header, rows, left=1, align=None):
    """A docs table: its first `left` columns left, the others right
    (or `align`, one entry per column)."""
    if align is None:
        align = [None] * left + ["right"] * (len(header) - left)
    return harness.markdown_table(header, rows, align)


def timings_of(pairs):
    return [Timing(*pair) for pair in pairs]


def spread(values):
    return Spread(tuple(values))


def value_range(values, spec=".0f"):
    """'low-high' of a `Spread` (one value where both print alike)."""
    low, high = format(values.low, spec), format(values.high, spec)
    return low if low == high else f"{low}-{high}"


def change(ratio):
    """A ratio as the whole-percent change it is: 1.546 -> '+55%'."""
    return f"{ratio - 1:+.0%}"


def _ratio(summary, reference_row):
    """A per-round ratio cell: '1' in the reference's own row."""
    return "1" if reference_row else summary.wall_ratio.format(".3f")


def times(ratio):
    """'0.92x [0.87, 0.97]' of a `Spread` of ratios."""
    return f"{ratio.median:.2f}x [{ratio.low:.2f}, {ratio.high:.2f}]"


def _title_load(raw):
    """The load average in the title of the table a run printed."""
    return re.search(r"load average ([\d.]+)", raw["table"]).group(1)


def _size_name(flags):
    """'small' for BERT-small dims (the `MODEL_SIZES` row of `flags`)."""
    for name, dims in MODEL_SIZES.items():
        if all(flags[key] == value for key, value in dims.items()):
            return name
    return "custom"


# -- the harness's JSON records --------------------------------------------

MAIN_JOB_CASES = {
    "keras_hub": "keras-hub `BertMaskedLM`, cached batches",
    "main_job": "main job (`tupe-r`, reader, callbacks), graph",
    "main_job_xla": "main job with XLA",
}


def main_job(path):
    raw = read_json(path)
    samples = {name: timings_of(t) for name, t in raw["samples"].items()}
    reference = samples["keras_hub"]
    rows, ratios = [], {}
    for name, timings in samples.items():
        summary = harness.summarize(timings, reference)
        ratios[name] = summary.wall_ratio
        ms = summary.wall.map(lambda t: t * 1e3)
        processes = [p for p in raw["processes"] if p["case"] == name]
        rows.append(
            [
                MAIN_JOB_CASES[name],
                ms.format(".0f"),
                f"{ms.high / ms.low:.2f}",
                _ratio(summary, timings is reference),
                spread(p["process_seconds"] for p in processes).format(".0f"),
                f"{statistics.median(p['peak_rss_mb'] for p in processes):,.0f}",
            ]
        )
    graph, xla = ratios["main_job"], ratios["main_job_xla"]
    met = "met" if graph.median <= MAIN_JOB_TARGET else "missed"
    shorter = xla.map(lambda r: (1 - r) * 100)
    return Figures(
        table(
            [
                "case",
                f"ms per step, median [min, max] over {len(reference)} "
                "processes",
                "max / min",
                "per-round ratio to keras-hub",
                "whole process s, median [min, max]",
                "peak RSS MB",
            ],
            rows,
        ),
        (
            f"for {raw['flags']['num_train_steps']} steps",
            f"median {raw['flags']['log_every']}-step window",
            f"load average {_title_load(raw)} at the start; "
            + day(raw["date"]),
            f"Target {MAIN_JOB_TARGET}x of plain keras-hub: {met} "
            f"({graph.median:.3f})",
            f"{shorter.low:.0f}-{shorter.high:.0f}% shorter in every round"
            if xla.high < 1
            else "not shorter in every round",
        ),
    )


def readme_step_times(path):
    """The README's phrase of the main job's step time (XLA, the default)."""
    samples = read_json(path)["samples"]
    xla, keras_hub = (
        harness.summarize(timings_of(samples[name])).wall.median * 1e3
        for name in ("main_job_xla", "keras_hub")
    )
    return (
        f"its training step takes {xla:.0f} ms against plain keras-hub "
        f"BERT's {keras_hub:.0f} ms"
    )


TRAIN_SETTINGS = {
    "jit=False,spe=1,cached": "`jit_compile=False`, "
    "`steps_per_execution=1`, cached batches",
    "jit=False,spe=8,cached": "`jit_compile=False`, `steps_per_execution=8`",
    "jit=True,spe=1,cached": "`jit_compile=True`, `steps_per_execution=1`",
    "jit=True,spe=8,cached": "`jit_compile=True`, `steps_per_execution=8`",
    "jit=False,spe=1,reader+prefetch": "shard reader + `prefetch` (the "
    "real input)",
    "jit=False,spe=1,reader,no prefetch": "shard reader, no `prefetch`",
}


def train_throughput(path):
    raw = read_json(path)
    medians = {
        name: {clock: statistics.median(s[clock]) for clock in s}
        for name, s in raw["settings"].items()
    }
    first = next(iter(medians.values()))
    rows = [
        [
            TRAIN_SETTINGS[name],
            f"{m['wall']:.1f}",
            f"{m['wall'] / first['wall']:.3f}",
            f"{m['cpu'] / first['cpu']:.3f}",
        ]
        for name, m in medians.items()
    ]
    load = raw["load_average_at_start"][0]
    return Figures(
        table(
            [
                "setting (`tupe-r`)",
                "seq/s wall (median)",
                "wall ratio",
                "CPU ratio",
            ],
            rows,
        ),
        (f"load average {load:.1f} at the start; {day(raw['date'])}",),
    )


def gradient_accumulation(path):
    raw = read_json(path)
    samples = {name: timings_of(t) for name, t in raw["samples"].items()}
    first = next(iter(samples))
    rows, rss, ratios = [], {}, {}
    for name, timings in samples.items():
        summary = harness.summarize(timings, samples[first])
        ratios[name] = summary.wall_ratio
        rss[name] = spread(
            p["peak_rss_mb"] for p in raw["processes"] if p["case"] == name
        )
        rows.append(
            [
                name,
                summary.wall.map(lambda t: t * 1e3).format(".2f"),
                _ratio(summary, name == first),
                rss[name].format(",.0f"),
            ]
        )
    batch, steps = (
        raw["flags"]["batch_size"],
        raw["flags"]["accumulation_steps"],
    )
    accumulated = f"batch {batch} as {steps} x {batch // steps}"
    memory = rss[accumulated].median / rss[first].median
    lost = "No" if ratios[accumulated].median <= 1 else "Some"
    return Figures(
        table(
            [
                "case",
                "ms per example, median [min, max]",
                f"per-round ratio to {first}",
                "peak RSS MB, median [min, max]",
            ],
            rows,
        ),
        (
            f"at batch {batch}, as {steps} x {batch // steps}, and at "
            f"{batch // steps}",
            f"load average {_title_load(raw)} at the start; "
            + day(raw["date"]),
            f"{lost} time per example lost; peak memory {change(memory)}",
        ),
    )


def fairseq_finetune_epoch(path):
    raw = read_json(path)
    rows, minutes = [], []
    for index, run in enumerate(raw["rounds"], 1):
        wall, cpu = run["epoch"]
        first = run["first_step"][0]
        minutes.append(wall / 60)
        rows.append(
            [
                index,
                f"{wall / 60:.1f}",
                f"{cpu / 60:.1f}",
                f"{first:.1f}",
                f"{(wall - first) / (run['steps'] - 1):.1f}",
            ]
        )
    (steps,) = {run["steps"] for run in raw["rounds"]}
    epochs = PAPER_FINETUNE_RECIPE["num_epochs"]
    fast, slow = min(minutes), max(minutes)
    return Figures(
        table(
            [
                "round",
                "epoch, wall min",
                "epoch, CPU min",
                "first step s (tracing, XLA)",
                "then s per step",
            ],
            rows,
            left=0,
        ),
        (
            f"{raw['backbone']['vocabulary_size']:,} ids",
            f"{steps} steps of {raw['batch_size']}",
            "load average "
            + re.search(r"load average ([\d.]+)", raw["machine"]).group(1)
            + " at the end",
            f"One CoLA epoch takes {fast:.0f}-{slow:.0f} minutes",
            f"({epochs} epochs) {fast * epochs / 60:.1f}-"
            f"{slow * epochs / 60:.1f} hours",
            f"The preset is {raw['preset_bytes'] / 1e6:.1f} MB; the float16 "
            f"checkpoint {raw['checkpoint_bytes'] / 1e6:.1f} MB",
        ),
    )


def step_overhead_table(names, samples):
    """The table of benchmarks/step_overhead.py's `samples` ({(name, step):
    Timings}, step "train" or "predict"): each step's median wall time and
    its per-round ratio to the first name's."""

    def cells(name, step):
        summary = harness.summarize(
            samples[name, step], samples[names[0], step]
        )
        wall, cpu = summary.wall_ratio, summary.cpu_ratio
        return [
            f"{summary.wall.median * 1e3:.1f}",
            f"{percent(wall.median)} [{percent(wall.low)}, "
            f"{percent(wall.high)}] / {percent(cpu.median)}",
        ]

    return table(
        [
            "option",
            "train step ms (wall)",
            "train vs BERT (wall [min, max] / CPU)",
            "predict ms (wall)",
            "predict vs BERT (wall [min, max] / CPU)",
        ],
        [
            [name] + cells(name, "train") + cells(name, "predict")
            for name in names
        ],
    )


def step_overhead_samples(raw):
    """(names, samples) of a raw file of benchmarks/step_overhead.py."""
    samples = {
        tuple(key.rsplit("/", 1)): timings_of(times)
        for key, times in raw["samples"].items()
    }
    return list(dict.fromkeys(name for name, _ in samples)), samples


def step_overhead(path):
    raw = read_json(path)
    names, samples = step_overhead_samples(raw)
    flags = raw["flags"]
    ratios = {
        name: {
            step: harness.summarize(
                samples[name, step], samples[names[0], step]
            ).wall_ratio
            for step in ("train", "predict")
        }
        for name in names[1:]
    }
    slower = [
        name
        for name, steps in ratios.items()
        if any(r.low > 1 for r in steps.values())
    ]
    phrases = [
        f"at length {flags['seq_length']}",
        f"batch {flags['batch_size']}",
        f"load average {_title_load(raw)} at the end",
    ]
    for name in slower:
        phrases.append(
            f"at BERT-{_size_name(flags)} "
            + ", ".join(
                f"{step} {percent(r.median)} [{percent(r.low)}, "
                f"{percent(r.high)}]"
                if r.low > 1
                else f"{step} no difference"
                for step, r in ratios[name].items()
            )
        )
    others = [ratios[name] for name in ratios if name not in slower]
    if len(slower) == 1 and others:
        phrases.append(
            f"Only `{slower[0]}` is slower than keras-hub's BERT in every round"
        )
    if others and all(
        r.low <= 1 <= r.high for steps in others for r in steps.values()
    ):
        phrases.append("Every other option's range holds 0")
    return Figures(step_overhead_table(names, samples), tuple(phrases))


BACKENDS = {"tensorflow": "TensorFlow", "jax": "JAX", "torch": "PyTorch"}


def backend_table(rows):
    """The table of benchmarks/backend_step.py's rows: option, backend,
    then step ms and ratio to TensorFlow, wall and CPU."""
    rows = [
        [option, BACKENDS[backend], wall_ms, wall, cpu_ms, cpu]
        if backend != "tensorflow"
        else [option, BACKENDS[backend], wall_ms, "1", cpu_ms, "1"]
        for option, backend, wall_ms, wall, cpu_ms, cpu in rows
    ]
    return table(
        [
            "option",
            "backend",
            "step ms (wall)",
            "vs TensorFlow (wall)",
            "step ms (CPU)",
            "vs TensorFlow (CPU)",
        ],
        rows,
        left=2,
    )


def backend_step(path):
    rows = []
    for row in read_json(path)["rows"]:
        cells = [row["option"], row["backend"]]
        for clock in ("wall", "cpu"):
            low, high = row[f"{clock}_ratio_range"]
            cells += [
                f"{row[f'{clock}_ms']:.1f}",
                f"{row[f'{clock}_ratio']:.2f}x [{low:.2f}, {high:.2f}]",
            ]
        rows.append(cells)
    return Figures(backend_table(rows))


# The JSON records of training and models; data_figures.py and
# printed_figures.py have the others.
FIGURES = {
    "main_job.json": main_job,
    "train_throughput.json": train_throughput,
    "gradient_accumulation.json": gradient_accumulation,
    "fairseq_finetune_epoch.json": fairseq_finetune_epoch,
    "backend_step_9rounds.json": backend_step,
    "step_overhead_small_128_9rounds.json": step_overhead,
    "step_overhead_base_128_9rounds.json": step_overhead,
}


def figure_functions():
    """{raw file name: its function}, JSON and .txt."""
    import data_figures
    import printed_figures

    return {**FIGURES, **data_figures.FIGURES, **printed_figures.FIGURES}


def figures(path):
    """The `Figures` of the raw file at `path` (by its name)."""
    return figure_functions()[os.path.basename(path)](path)


def main(paths):
    for path in paths:
        found = figures(path)
        print(f"{path}:\n")
        if found.table:
            print(found.table + "\n")
        for phrase in found.phrases:
            print(f"- {phrase}")
        print()


if __name__ == "__main__":
    main(sys.argv[1:])
