"""The figures of the data pipeline's JSON records: the reader, static
whole-word shards and vocabulary learning (see figures.py)."""

import json

import harness
from figures import READER_TARGET
from figures import VOCAB_TARGET
from figures import WHOLE_WORD_TARGET
from figures import Figures
from figures import day
from figures import percent
from figures import read
from figures import read_json
from figures import spread
from figures import table
from figures import times
from figures import timings_of
from figures import value_range

READER_MODES = {
    "default": "default (interleave, shuffle, parse, pad, mask, prefetch)",
    "deterministic": "`deterministic=True`",
    "whole_word_masking": "`whole_word_masking=True`",
}


def reader_throughput(path):
    raw = read_json(path)
    batch = raw["flags"]["batch_size"]
    samples = {name: timings_of(t) for name, t in raw["samples"].items()}
    rows, rates = [], []
    for name, timings in samples.items():
        summary = harness.summarize(timings, samples["default"])
        rate = summary.wall.map(lambda t: batch / t)
        rates.append(rate.median)
        rows.append(
            [
                READER_MODES[name],
                rate.format(",.0f"),
                f"{batch / summary.cpu.median:,.0f}",
                "1" if name == "default" else summary.wall_ratio.format(".2f"),
            ]
        )
    met = (
        f"met by every mode ({min(rates) / READER_TARGET:.1f}x the slowest)"
        if min(rates) >= READER_TARGET
        else "missed"
    )
    return Figures(
        table(
            [
                "mode",
                "seq/s, median [min, max]",
                "seq per CPU-s",
                "time per batch vs default",
            ],
            rows,
        ),
        (
            f"length {raw['flags']['seq_length']}, batch {batch}",
            f"Target {READER_TARGET:,} sequences/s on 2 cores: {met}",
        ),
    )


SHARD_BUILDS = {
    "tupe-tf dynamic 1x": "dynamic masking",
    "tupe-tf static 1x": "static masking",
    "tupe-tf static whole-word 1x": "static whole-word masking",
}


def shard_building_wwm(path):
    raw = read_json(path)
    rows = []
    for name, label in SHARD_BUILDS.items():
        runs = raw["runs"][name]
        rows.append(
            [label]
            + [
                spread(run[key] for run in runs).format(".1f")
                for key in ("wall_s", "cpu_s", "processing_s")
            ]
            + [value_range(spread(run["peak_rss_mb"] for run in runs))]
        )
    static, whole_word = (
        timings_of(raw["samples"][name])
        for name in ("tupe-tf static 1x", "tupe-tf static whole-word 1x")
    )
    time = harness.summarize(whole_word, static).wall_ratio
    throughput = harness.summarize(static, whole_word)
    return Figures(
        table(
            ["build", "wall s", "CPU s", "processing s", "peak RSS MB"], rows
        ),
        (
            f"wall {times(throughput.wall_ratio)} ({percent(time.median)} "
            f"time, target +{WHOLE_WORD_TARGET:.0%}; slowest round "
            f"{percent(time.high)}), CPU {times(throughput.cpu_ratio)}",
        ),
    )


VOCAB_LEARNERS = {
    "tokenizers": "tokenizers (default)",
    "tf_text": "TF-Text `bert_vocab_from_dataset`",
}


def vocab_learning_runs(path):
    runs = [json.loads(line) for line in read(path).splitlines() if line]
    rows = []
    for learner, label in VOCAB_LEARNERS.items():
        mine = [run for run in runs if run["learner"] == learner]
        wall = spread(run["wall_s"] for run in mine)
        (megabytes,) = {run["size_mb"] for run in mine}
        (vocab_size,) = {run["vocab_size"] for run in mine}
        rows.append(
            [
                label,
                len(mine),
                wall.format(".1f"),
                spread(run["cpu_s"] for run in mine).format(".1f"),
                f"{megabytes / wall.median:.2f}",
                value_range(spread(run["peak_rss_mb"] for run in mine)),
                f"{vocab_size:,}",
            ]
        )
    load = spread(run["load"] for run in runs)
    return Figures(
        table(
            [
                "learner",
                "runs",
                "wall s, median [min, max]",
                "CPU s, median [min, max]",
                "MB/s (median wall)",
                "peak RSS MB",
                "vocab size",
            ],
            rows,
        ),
        (
            f"load average {value_range(load, '.1f')} after each run; "
            + day(runs[-1]["finished"]),
        ),
    )


def vocab_learning_summary(path):
    raw = read_json(path)
    (size,) = raw["sizes"].values()
    cpu, wall = size["per_round_cpu_ratio"], size["per_round_wall_ratio"]
    ours, theirs = raw["held_out"]["tokenizers"], raw["held_out"]["tf_text"]
    return Figures(
        None,
        (
            f"**{cpu['median']:.1f}x [{cpu['min']:.1f}, {cpu['max']:.1f}]** "
            f"per CPU-second, {wall['median']:.1f}x wall (target "
            f"{VOCAB_TARGET}x: {'met' if cpu['min'] >= VOCAB_TARGET else 'missed'})",
            f"{ours['pieces_per_word']:.4f} against "
            f"{theirs['pieces_per_word']:.4f}, `[UNK]` {ours['unk_pct']:.4f}% "
            f"against {theirs['unk_pct']:.4f}%",
        ),
    )


def vocab_learning_memory(path):
    ((megabytes, size),) = read_json(path)["sizes"].items()
    return Figures(
        None,
        (
            f"at {megabytes} MB {size['tf_text']['max_peak_rss_mb']:,.0f} MB "
            f"against {size['tokenizers']['max_peak_rss_mb']:,.0f} MB",
        ),
    )


FIGURES = {
    "vocab_learning_32mb_runs.jsonl": vocab_learning_runs,
    "vocab_learning_32mb_9rounds.json": vocab_learning_summary,
    "vocab_learning_128mb.json": vocab_learning_memory,
    "reader_throughput_wwm_9rounds.json": reader_throughput,
    "shard_building_wwm_9rounds.json": shard_building_wwm,
}
