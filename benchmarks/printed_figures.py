"""The figures of the raw files in .txt: older runs' printed output.

They predate the harness's JSON record (`harness.write_json`); each function
here parses the markdown tables and lines a run printed and returns the
`figures.Figures` of docs/benchmarks.md, as `figures.py` does for the JSON
records (`figures.figure_functions()` maps every raw file to its function).
"""

import json
import re

from figures import EXPORT_TARGET
from figures import MFU_GOAL
from figures import SHARD_MEMORY_TARGET_MB
from figures import SHARD_TARGET
from figures import Figures
from figures import backend_table
from figures import change
from figures import read
from figures import spread
from figures import table
from figures import value_range


def markdown_rows(lines):
    """The rows of the markdown tables among `lines`, as {column: cell}; a
    table's header is the line above its `---` line."""
    rows, header = [], None
    for line, below in zip(lines, list(lines[1:]) + [""]):
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if below.startswith("|") and set(below) <= set("|-: "):
            header = cells
        elif not set(line) <= set("|-: "):
            rows.append(dict(zip(header, cells)))
    return rows


def number(cell):
    """The first number of a printed cell: 1,528,720 / 24.9% / 1.26x [...]."""
    return float(re.match(r"[-+\d.,]+", cell).group().replace(",", ""))


def _sections(text):
    """The lines of each '## title' section of `text`."""
    return [
        block.splitlines()[1:]
        for block in re.split(r"^## ", text, flags=re.M)[1:]
    ]


def _dims(text):
    """{name: value} of the first 'dims' line a GPU run printed."""
    line = re.search(r"^dims:? (.*)$", text, re.M).group(1)
    return dict(re.findall(r"(\w+)=([\w.]+)", line))


def _flag(text, name):
    return re.search(rf"--{name}=(\S+)", text).group(1)


SHARD_TOOLS = {
    "tupe-tf static": "tupe-tf, static masking",
    "tupe-tf dynamic": "tupe-tf, dynamic masking (default)",
    "Model Garden": "Model Garden `create_pretraining_data.py`",
}


def shard_building_model_garden(path):
    """benchmarks/shard_building.py's rounds, each printed on its own."""
    text = read(path)
    rounds = markdown_rows(text.splitlines())
    rows, rss = [], {}
    for tool, label in SHARD_TOOLS.items():
        mine = [row for row in rounds if row["tool"] == tool]
        column = {
            name: spread(number(row[name]) for row in mine)
            for name in mine[0]
            if name not in ("tool", "corpus")
        }
        rss[tool] = column["peak RSS MB"]
        rows.append(
            [
                label,
                column["wall s"].format(".1f"),
                column["CPU s"].format(".1f", median_only=True),
                column["processing s"].format(".1f", median_only=True),
                column["MB/s (wall)"].format(".2f", median_only=True),
                column["tokens/s (wall)"].format(",.0f", median_only=True),
                value_range(rss[tool], ",.0f"),
                f"{int(mine[0]['examples']):,}",
            ]
        )
    loads = spread(
        float(load)
        for pair in re.findall(r"before/after: ([\d.]+) / ([\d.]+)", text)
        for load in pair
    )
    ratio = {
        name: re.search(
            rf"^{name} \[.*\] median ([\d.]+) \[([\d.]+), ([\d.]+)\]",
            text,
            re.M,
        ).groups()
        for name in ("wall", "cpu", "processing")
    }
    met = (
        float(ratio["wall"][0]) >= SHARD_TARGET
        and rss["tupe-tf static"].high < SHARD_MEMORY_TARGET_MB
    )
    (megabytes,) = {row["MB"] for row in rounds}
    return Figures(
        table(
            [
                "tool",
                "wall s",
                "CPU s",
                "processing s",
                "MB/s (wall)",
                "tokens/s (wall)",
                "peak RSS MB",
                "examples",
            ],
            rows,
        ),
        (
            f"{megabytes} MB",
            f"{len(rounds) // len(SHARD_TOOLS)} rounds",
            f"load average {value_range(loads, '.1f')} before and after "
            "each round",
            "**{}x** wall ({}-{}), **{}x** per CPU-second ({}-{}), **{}x** "
            "processing".format(
                *ratio["wall"], *ratio["cpu"], ratio["processing"][0]
            )
            + f"; targets ({SHARD_TARGET}x, under {SHARD_MEMORY_TARGET_MB // 1024} GB) "
            + ("met" if met else "missed"),
        ),
    )


SCALE_ENGINES = {
    "single process": "single process (default)",
    "Beam DirectRunner, 2 workers": "Beam DirectRunner, 2 worker "
    "processes, 2 partitions",
}


def shard_building_scale(path):
    """benchmarks/shard_building.py --scale_gb: per-round and summary
    tables and the per-round ratio line."""
    text = read(path)
    printed = markdown_rows(text.splitlines())
    summary = {row["engine"]: row for row in printed if "round" not in row}
    rows, examples = [], []
    for engine, label in SCALE_ENGINES.items():
        mine = [row for row in printed if row.get("engine") == engine]
        mine = [row for row in mine if "round" in row]
        (count,) = {int(row["examples"]) for row in mine}
        examples.append(count)
        rss = f"{number(summary[engine]['max peak RSS MB']):,.0f}"
        rows.append(
            [
                label,
                summary[engine]["median wall s [min, max]"],
                summary[engine]["median MB/s"],
                value_range(spread(number(row["CPU s"]) for row in mine)),
                rss
                if engine == "single process"
                else f"{rss} (largest process)",
                f"{count:,}",
            ]
        )
    per_round, median = re.search(
        r"per round \(wall\): ([\d. ]+); median ([\d.]+)x", text
    ).groups()
    per_round = per_round.split()
    megabytes = int(re.search(r"generated corpus (\d+) MB", text).group(1))
    load = re.search(r"load average before/after: ([\d.]+)", text).group(1)
    return Figures(
        table(
            [
                "engine",
                "wall s, median [min, max]",
                "MB/s (median wall)",
                "CPU s per run",
                "peak RSS MB (max)",
                "examples",
            ],
            rows,
        ),
        (
            f"at {_flag(text, 'scale_gb')} GB",
            f"{megabytes:,} MB",
            f"length {_flag(text, 'max_seq_length')}, "
            f"{_flag(text, 'num_shards')} shards",
            f"load average {load} at the start; "
            + re.search(r"Scale point, ([\d-]+),", text).group(1),
            f"per round {per_round[0]}-{per_round[-1]}, **median {median}x**",
            f"({examples[0] - examples[1]:,} fewer examples)",
        ),
    )


def export_latency(path):
    """benchmarks/export_latency.py: one row per export, folded or not
    (its printed output, or its JSON record's `report`)."""
    text = read(path)
    if path.endswith(".json"):
        text = json.loads(text)["report"]
    cells = {row["model"]: row for row in markdown_rows(text.splitlines())}
    columns = [c for c in next(iter(cells.values())) if c != "model"]
    batches = [column.split(":")[0] for column in columns]
    rows, over = [], []
    for model in cells:
        if model.endswith(" unfolded"):
            continue
        row = [model]
        for batch, column in zip(batches, columns):
            row += [cells[model][column], cells[f"{model} unfolded"][column]]
            if number(cells[model][column]) > EXPORT_TARGET * 100:
                over.append(f"`{model}` at {batch}")
        rows.append(row)
    bert = re.findall(
        r"^bert (batch \d+): median ([\d.]+) ms per call", text, re.M
    )
    date, load = re.search(
        r"; (\S+) \S+ UTC; load average ([\d.]+)", text
    ).groups()
    return Figures(
        table(
            ["model"]
            + [
                f"{b}, {fold}"
                for b in batches
                for fold in ("folded", "unfolded")
            ],
            rows,
        ),
        (
            "length " + re.search(r"seq (\d+),", text).group(1),
            f"load average {load} at the end; {date}",
            "`bert`: "
            + ", ".join(
                f"{float(ms):.3g} ms per call at {batch}"
                if index == 0
                else f"{float(ms):.3g} ms at {batch}"
                for index, (batch, ms) in enumerate(bert)
            ),
            f"Target +{EXPORT_TARGET:.0%}: folded exports meet it"
            + (" except " + ", ".join(over) if over else ""),
        ),
    )


def backend_step_printed(path):
    """benchmarks/backend_step.py's printed table (its JSON's too)."""
    rows = []
    for row in markdown_rows(read(path).splitlines()):
        option, backend, wall_ms, wall, cpu_ms, cpu = row.values()
        rows.append([option, backend, wall_ms, wall, cpu_ms, cpu])
    return Figures(backend_table(rows))


def _explicit_over_fused(cell):
    """'1.26 [1.11, 1.31]' of a printed '1.26x (1.11-1.31)'."""
    median, low, high = re.match(
        r"([\d.]+)x \(([\d.]+)-([\d.]+)\)", cell
    ).groups()
    return f"{median} [{low}, {high}]"


def fused_attention(path):
    """benchmarks/fused_attention.py: a forward and a train-step row per
    encoding and dtype; `bert` (no bias) goes to the text."""
    text = read(path)
    models = {}
    for row in markdown_rows(text.splitlines()):
        key = row["position encoding"], row["dtype"]
        models.setdefault(key, {})[row["step"]] = row
    rows, bert = [], []
    for (encoding, dtype), steps in models.items():
        forward, train = steps["forward"], steps["train step"]
        calls = re.findall(r"(\d+) __cudnn", train["fused kernel"])
        kernel = (
            f"cuDNN ({calls[0]} + {calls[1]} backward)"
            if calls
            else train["fused kernel"]
        )
        ratios = [
            _explicit_over_fused(s["explicit / fused (min-max)"])
            for s in (forward, train)
        ]
        if encoding == "bert":
            if dtype == "mixed_bfloat16":
                bert.append(f"(forward {ratios[0]}, train {ratios[1]})")
            continue
        rows.append(
            [
                encoding,
                dtype,
                kernel,
                f"{forward['fused ms']} / {forward['explicit ms']}",
                ratios[0],
                f"{train['fused ms']} / {train['explicit ms']}",
                ratios[1],
            ]
        )
    dims = _dims(text)
    return Figures(
        table(
            [
                "option",
                "dtype",
                "kernel (fused)",
                "forward ms, fused / explicit",
                "forward explicit / fused",
                "train step ms, fused / explicit",
                "train step explicit / fused",
            ],
            rows,
            left=3,
        ),
        (f"length {dims['seq']}, batch {dims['batch']}", *bert),
    )


def gpu_train_step(path):
    """benchmarks/gpu_train_step.py, one '## ' section per run: padding as
    a mask (the table) and as key lengths (the text)."""
    text = read(path)
    runs = [(_dims("\n".join(lines)), lines) for lines in _sections(text)]
    first_dims, first_lines = runs[0]
    rows, mfu, tupe_r = [], [], {}
    for dims, lines in runs:
        if dims.get("padding", "mask") != "mask":
            continue
        dropout = float(dims["dropout"])
        for row in markdown_rows(lines):
            name, ratio = row["position encoding"], row["step / bert"]
            rows.append(
                [name, dims["batch"], f"{dropout:g}", row["attention"]]
                + [row[c] for c in ("step ms", "tokens/s", "MFU")]
                + ["1" if name == "bert" else ratio]
            )
            mfu += [] if dropout else [number(row["MFU"])]
            if name == "tupe-r":
                tupe_r[dims["batch"], dropout] = number(ratio)
    step = {
        row["position encoding"]: number(row["step ms"])
        for row in markdown_rows(first_lines)
    }
    (lengths,) = [
        lines for dims, lines in runs if dims.get("padding") == "lengths"
    ]
    slower = spread(
        (number(row["step ms"]) / step[row["position encoding"]] - 1) * 100
        for row in markdown_rows(lengths)
    )
    faster = spread((1 - r) * 100 for (_, d), r in tupe_r.items() if not d)
    (with_dropout,) = [r for (_, d), r in tupe_r.items() if d]
    (kernels,) = {
        len(re.findall(r"^ +[\d.]+ ms/step", block, re.M))
        for block in text.split("costliest kernels")[1:]
    }
    flops = re.search(r"([\d.]+) model TFLOP/step", "\n".join(first_lines))
    batch = first_dims["batch"]
    return Figures(
        table(
            [
                "option",
                "batch",
                "dropout",
                "attention",
                "step ms",
                "tokens/s",
                "MFU",
                "vs bert",
            ],
            rows,
            align=[None, "right", "right", None] + ["right"] * 4,
        ),
        (
            f"length {first_dims['seq']}, batch {batch}",
            f"({flops.group(1)} TFLOP at batch {batch})",
            f"`tupe-r` is {faster.low:.0f}-{faster.high:.0f}% faster than "
            "`bert`",
            f"`tupe-r` costs {change(with_dropout)}",
            f"MFU {min(mfu):.0f}-{max(mfu):.0f}%, short of the {MFU_GOAL}% "
            f"goal (the raw file: each run's {kernels} costliest kernels; "
            f"padding as key lengths, {slower.low:.0f}-{slower.high:.0f}% "
            "slower)",
        ),
    )


def gpu_step_overhead(path):
    """benchmarks/gpu_train_step.py --predict, every encoding; the second
    section: `shaw` by a gather of the scores instead of the skew."""
    every, gather = (markdown_rows(lines) for lines in _sections(read(path)))
    reference = every[0]["position encoding"]
    rows, train, predict, memory = [], [], [], {"cuDNN": [], "XLA": []}
    for row in every:
        name = row["position encoding"]
        ratios = row["step / reference"], row["predict / reference"]
        rows.append(
            [name, row["attention"], row["step ms"]]
            + ["1" if name == reference else ratios[0], row["train MB"]]
            + [row["predict ms"], "1" if name == reference else ratios[1]]
            + [row["predict MB"]]
        )
        if name == "shaw":
            shaw = [number(r) for r in ratios]
        elif name != reference:
            train.append(number(ratios[0]))
            predict.append(number(ratios[1]))
            memory[row["attention"]].append(number(row["train MB"]) / 1e3)
    (gathered,) = [
        number(row["step / reference"])
        for row in gather
        if row["position encoding"] == "shaw"
    ]
    dims = _dims(read(path))
    fused, explicit = (spread(memory[a]) for a in ("cuDNN", "XLA"))
    return Figures(
        table(
            [
                "option",
                "attention",
                "train ms",
                "train vs keras-hub",
                "train MB",
                "predict ms",
                "predict vs keras-hub",
                "predict MB",
            ],
            rows,
            left=2,
        ),
        (
            f"at length {dims['seq']}",
            f"length {dims['seq']}, batch {dims['batch']}",
            f"({min(train):.2f}-{max(train):.2f} train, "
            f"{min(predict):.2f}-{max(predict):.2f} predict)",
            f"train step {fused.low:.2f}-{fused.high:.2f} GB against "
            f"{explicit.low:.2f}-{explicit.high:.2f} GB",
            f"{change(shaw[0])} train, {change(shaw[1])} predict",
            f"{gathered:.1f}x keras-hub's train step",
        ),
    )


FIGURES = {
    "shard_building_32mb_9rounds.txt": shard_building_model_garden,
    "shard_building_scale_1gb_9rounds.txt": shard_building_scale,
    "export_latency_9rounds.txt": export_latency,
    "backend_step_9rounds.txt": backend_step_printed,
    "fused_attention_h100.txt": fused_attention,
    "gpu_train_step_h200.txt": gpu_train_step,
    "gpu_step_overhead_512_h200.txt": gpu_step_overhead,
}
