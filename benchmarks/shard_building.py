r"""Shard building: tupe-tf `build_shards.py` vs TF Model Garden's
`official/nlp/data/create_pretraining_data.py`, side by side in one run.

Both get the same corpus (the embedded gensim Wikipedia sample repeated to
>= 30 MB, then doubled), the same lowercase WordPiece vocabulary,
max_seq_length=128, dupe_factor=1, max_predictions_per_seq=20. Each run is a
fresh child process; its peak RSS comes from `getrusage(RUSAGE_CHILDREN)` of
a one-child wrapper process.

Reported per run: whole-process wall time, CPU time, MB/s and tokens/s on
whole-process wall time, the processing time without start-up (tupe-tf: timed
inside the script after `import tensorflow`; Model Garden: first to last log
line), and peak RSS. Tokens are the corpus's word pieces as counted by
tupe-tf's manifest (the same vocabulary and lowercasing for both).

Model Garden is installed at benchmark time only:
  pip install --no-deps tf-models-official   # plus tf-keras, six, sentencepiece

Scale point (`--scale_gb=1`, instead of the comparison above): a generated
corpus of that size (perturbed Wikipedia paragraphs, see
`benchmarks/vocab_learning.py`, not one file repeated), built by the
single-process path (dynamic masking: wall, MB/s, peak RSS) and by the Beam
path on 2 local worker processes (`--runner=DirectRunner --num_partitions=2
--direct_num_workers=2 --direct_running_mode=multi_processing`, run with
`--beam_python`, a Python that has apache-beam). The Beam run's peak RSS is
the largest single process among the launcher and its workers, not their sum.

Usage:
  python benchmarks/shard_building.py [--copies=11] [--work_dir=/tmp/tupe_bench_shards]
      [--skip_model_garden] [--skip_doubled]
  python benchmarks/shard_building.py --scale_gb=1 [--rounds=9]
      [--beam_python=/work/venv-beam/bin/python]
"""

import argparse
import datetime
import json
import os
import re
import shutil
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_WRAPPER = r"""
import json, resource, subprocess, sys, time
start = time.time()
with open(sys.argv[1], "w") as log:
  code = subprocess.call(sys.argv[2:], stdout=log, stderr=subprocess.STDOUT)
wall = time.time() - start
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"returncode": code, "wall_s": wall,
                  "cpu_s": usage.ru_utime + usage.ru_stime,
                  "peak_rss_mb": usage.ru_maxrss / 1024}))
"""

_LOG_TIME_RE = re.compile(r"^[IWE]\d{4} (\d\d):(\d\d):(\d\d\.\d+)", re.M)


def measure(command, log_path):
    """Runs `command` in a fresh wrapper; returns wall, CPU and peak RSS."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="1", PYTHONPATH=ROOT)
    out = subprocess.run(
        [sys.executable, "-c", _WRAPPER, log_path] + command,
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if result["returncode"] != 0:
        with open(log_path) as f:
            tail = f.read()[-3000:]
        raise RuntimeError(f"{' '.join(command)} failed:\n{tail}")
    return result


def model_garden_processing_seconds(log_path):
    """First to last absl log line of a Model Garden run (after imports)."""
    with open(log_path, errors="replace") as f:
        times = [
            int(h) * 3600 + int(m) * 60 + float(s)
            for h, m, s in _LOG_TIME_RE.findall(f.read())
        ]
    return times[-1] - times[0] if len(times) >= 2 else float("nan")


def make_corpus(path, source, copies):
    with open(path, "wb") as out:
        for _ in range(copies):
            with open(source, "rb") as f:
                shutil.copyfileobj(f, out)
    return os.path.getsize(path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--copies",
        type=int,
        default=11,
        help="copies of the ~2.9 MB sample (11 -> ~32 MB)",
    )
    parser.add_argument("--work_dir", default="/tmp/tupe_bench_shards")
    parser.add_argument("--vocab_size", type=int, default=16000)
    parser.add_argument("--skip_model_garden", action="store_true")
    parser.add_argument("--skip_doubled", action="store_true")
    parser.add_argument(
        "--scale_gb",
        type=float,
        default=0,
        help="run only the scale point on a generated corpus of this size",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=9,
        help="scale point: interleaved rounds of both engines (order "
        "alternates per round); the ratio is reported per round",
    )
    parser.add_argument(
        "--beam_python",
        default=sys.executable,
        help="Python with apache-beam for the scale point's Beam run",
    )
    args = parser.parse_args()

    from data_pipeline import corpus as corpus_lib  # pylint: disable=g-import-not-at-top
    from data_pipeline import vocab as vocab_lib  # pylint: disable=g-import-not-at-top

    os.makedirs(args.work_dir, exist_ok=True)
    source = corpus_lib.embedded_corpus_path()
    vocab_file = os.path.join(args.work_dir, "vocab.txt")
    if not os.path.exists(vocab_file):
        print("Learning the vocabulary on the embedded sample ...")
        vocab_lib.build_vocabulary(
            source, args.vocab_size, vocab_file, lowercase=True
        )
    sizes = (
        {"1x": args.copies}
        if args.skip_doubled
        else {"1x": args.copies, "2x": 2 * args.copies}
    )
    if args.scale_gb:
        scale_point(args, vocab_file)
        return
    corpora = {}
    for label, copies in sizes.items():
        path = os.path.join(args.work_dir, f"corpus_{label}.txt")
        corpora[label] = (path, make_corpus(path, source, copies))

    mg_script = None
    if not args.skip_model_garden:
        try:
            import official  # pylint: disable=g-import-not-at-top

            mg_script = os.path.join(
                os.path.dirname(official.__file__),
                "nlp",
                "data",
                "create_pretraining_data.py",
            )
        except ImportError:
            print(
                "Model Garden not installed: pip install --no-deps "
                "tf-models-official (skipping it)"
            )

    def ours(label, static):
        out_dir = os.path.join(args.work_dir, f"ours_{label}_{static}")
        command = [
            sys.executable,
            os.path.join(ROOT, "scripts", "build_shards.py"),
            f"--input={corpora[label][0]}",
            f"--vocab_file={vocab_file}",
            f"--output_dir={out_dir}",
            "--max_seq_length=128",
            "--num_shards=8",
            "--seed=12345",
            "--lowercase",
            "--overwrite",
        ]
        if static == "static":
            command += [
                "--static_masking",
                "--dupe_factor=1",
                "--max_predictions_per_seq=20",
            ]
        return command, out_dir

    def garden(label):
        out_file = os.path.join(args.work_dir, f"mg_{label}.tfrecord")
        return [
            sys.executable,
            mg_script,
            f"--input_file={corpora[label][0]}",
            f"--output_file={out_file}",
            f"--vocab_file={vocab_file}",
            "--do_lower_case=true",
            "--max_seq_length=128",
            "--dupe_factor=1",
            "--max_predictions_per_seq=20",
            "--masked_lm_prob=0.15",
            "--do_whole_word_mask=false",
            "--random_seed=12345",
        ], out_file

    # Start-up floor: a process that only imports TensorFlow and TF-Text.
    baseline = measure(
        [sys.executable, "-c", "import tensorflow, tensorflow_text"],
        os.path.join(args.work_dir, "import_only.log"),
    )
    print("import tensorflow + tensorflow_text only:", json.dumps(baseline))
    load_before = os.getloadavg()
    runs = []
    tokens = {}
    # Interleaved, so that machine load hits both tools alike.
    plan = [
        ("tupe-tf static", "1x"),
        ("Model Garden", "1x"),
        ("tupe-tf dynamic", "1x"),
    ]
    if "2x" in sizes:
        plan += [("tupe-tf static", "2x"), ("Model Garden", "2x")]
    for tool, label in plan:
        if tool == "Model Garden" and not mg_script:
            continue
        log_path = os.path.join(
            args.work_dir, f"{tool.replace(' ', '_')}_{label}.log"
        )
        if tool == "Model Garden":
            command, out_path = garden(label)
        else:
            command, out_path = ours(label, tool.split()[1])
        print(f"running {tool} on {label} ...", flush=True)
        result = measure(command, log_path)
        if tool == "Model Garden":
            result["processing_s"] = model_garden_processing_seconds(log_path)
            result["output_mb"] = os.path.getsize(out_path) / 1e6
            with open(log_path, errors="replace") as f:
                found = re.findall(r"Wrote (\d+) total instances", f.read())
            result["examples"] = int(found[-1]) if found else None
        else:
            summary = _last_json(log_path)
            result["processing_s"] = summary["seconds"]
            result["examples"] = summary["examples"]
            tokens[label] = summary["text_tokens"]
            with open(os.path.join(out_path, "manifest.json")) as f:
                manifest = json.load(f)
            result["output_mb"] = (
                sum(s["bytes"] for s in manifest["shards"]) / 1e6
            )
            result["fill_ratio"] = manifest["stats"]["fill_ratio"]
        result.update(
            tool=tool,
            corpus=label,
            corpus_mb=corpora[label][1] / 1e6,
            command=command,
        )
        runs.append(result)
        print(
            json.dumps({k: v for k, v in result.items() if k != "command"}),
            flush=True,
        )

    print()
    print(
        "Machine load average (1 min) before/after: "
        f"{load_before[0]:.1f} / {os.getloadavg()[0]:.1f} "
        "(other processes share the cores: wall times include waiting)"
    )
    print(
        f"Shard building, {datetime.date.today()}, {os.cpu_count()} cores, "
        f"max_seq_length=128, dupe_factor=1, vocab "
        f"{sum(1 for _ in open(vocab_file))} tokens (lowercase)"
    )
    header = (
        "| tool | corpus | MB | wall s | CPU s | processing s | MB/s (wall)"
        " | tokens/s (wall) | MB/s (processing) | peak RSS MB | examples |"
    )
    print(header)
    print("|" + "---|" * 11)
    for r in runs:
        tok = tokens.get(r["corpus"])
        print(
            f"| {r['tool']} | {r['corpus']} | {r['corpus_mb']:.1f} | "
            f"{r['wall_s']:.1f} | {r['cpu_s']:.1f} | {r['processing_s']:.1f} | "
            f"{r['corpus_mb'] / r['wall_s']:.2f} | "
            f"{(tok or 0) / r['wall_s']:,.0f} | "
            f"{r['corpus_mb'] / r['processing_s']:.2f} | "
            f"{r['peak_rss_mb']:.0f} | {r['examples']} |"
        )
    by_key = {(r["tool"], r["corpus"]): r for r in runs}
    for label in sizes:
        mg = by_key.get(("Model Garden", label))
        ours_static = by_key.get(("tupe-tf static", label))
        if mg and ours_static:
            print(
                f"{label}: tupe-tf (static) vs Model Garden: "
                f"{mg['wall_s'] / ours_static['wall_s']:.1f}x whole-process "
                f"wall-time throughput, {mg['cpu_s'] / ours_static['cpu_s']:.1f}x "
                "whole-process CPU-time throughput, "
                f"{mg['processing_s'] / ours_static['processing_s']:.1f}"
                "x processing throughput, peak RSS "
                f"{ours_static['peak_rss_mb']:.0f} MB vs {mg['peak_rss_mb']:.0f} MB"
            )
    print(
        f"Start-up floor (import tensorflow + tensorflow_text only): "
        f"{baseline['wall_s']:.1f} s wall, {baseline['cpu_s']:.1f} s CPU, "
        f"{baseline['peak_rss_mb']:.0f} MB peak RSS"
    )
    if ("tupe-tf static", "2x") in by_key:
        a, b = (
            by_key[("tupe-tf static", "1x")],
            by_key[("tupe-tf static", "2x")],
        )
        print(
            f"tupe-tf peak RSS 1x -> 2x corpus: {a['peak_rss_mb']:.0f} -> "
            f"{b['peak_rss_mb']:.0f} MB"
        )
    print()
    print(
        "Reproduce: python benchmarks/shard_building.py "
        + " ".join(sys.argv[1:])
    )
    print("Commands run:")
    for r in runs:
        print("  " + " ".join(r["command"]))


def scale_point(args, vocab_file):
    """Single-process vs Beam (2 local workers) on a generated corpus."""
    from benchmarks import synthetic_corpus  # pylint: disable=g-import-not-at-top

    size_mb = int(args.scale_gb * 1024)
    path = os.path.join(args.work_dir, f"synthetic_{size_mb}mb.txt")
    print(
        f"Generating {size_mb} MB of perturbed Wikipedia text ...", flush=True
    )
    meta = synthetic_corpus.generate_corpus(path, size_mb)
    corpus_mb = os.path.getsize(path) / 1e6
    common = [
        os.path.join(ROOT, "scripts", "build_shards.py"),
        f"--input={path}",
        f"--vocab_file={vocab_file}",
        "--max_seq_length=128",
        "--num_shards=8",
        "--lowercase",
        "--overwrite",
    ]
    plan = {
        "single process": [sys.executable]
        + common
        + [f"--output_dir={os.path.join(args.work_dir, 'scale_single')}"],
        "Beam DirectRunner, 2 workers": [args.beam_python]
        + common
        + [
            f"--output_dir={os.path.join(args.work_dir, 'scale_beam')}",
            "--runner=DirectRunner",
            "--num_partitions=2",
            "--beam_options=--direct_num_workers=2 "
            "--direct_running_mode=multi_processing",
        ],
    }
    load_before = os.getloadavg()
    rows = []  # (round, engine, result, summary)
    names = list(plan)
    for round_index in range(args.rounds):
        # Alternate the order so that neither engine always runs second.
        order = names if round_index % 2 == 0 else names[::-1]
        for name in order:
            print(f"round {round_index}: running {name} ...", flush=True)
            log_path = os.path.join(
                args.work_dir, "scale_" + name.split()[0].lower() + ".log"
            )
            result = measure(plan[name], log_path)
            summary = _last_json(log_path)
            rows.append((round_index, name, result, summary))
            print(
                json.dumps({"round": round_index, "tool": name, **result}),
                flush=True,
            )
    print(
        f"Scale point, {datetime.date.today()}, {os.cpu_count()} cores, "
        f"generated corpus {corpus_mb:.0f} MB "
        f"({meta['distinct_space_separated_words']:,} distinct "
        "space-separated words), load average before/after: "
        f"{load_before[0]:.1f} / {os.getloadavg()[0]:.1f}"
    )
    print(
        "| round | engine | wall s | CPU s | MB/s (wall) | peak RSS MB "
        "| examples |"
    )
    print("|---|---|---|---|---|---|---|")
    for round_index, name, r, summary in rows:
        print(
            f"| {round_index} | {name} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} | "
            f"{corpus_mb / r['wall_s']:.2f} | {r['peak_rss_mb']:.0f} | "
            f"{summary['examples']} |"
        )
    print(
        "| engine | median wall s [min, max] | median MB/s | max peak RSS MB |"
    )
    print("|---|---|---|---|")
    for name in names:
        walls = sorted(r["wall_s"] for _, n, r, _ in rows if n == name)
        rss = max(r["peak_rss_mb"] for _, n, r, _ in rows if n == name)
        median = statistics.median(walls)
        print(
            f"| {name} | {median:.1f} [{walls[0]:.1f}, {walls[-1]:.1f}] | "
            f"{corpus_mb / median:.2f} | {rss:.0f} |"
        )
    by_round = {(i, n): r for i, n, r, _ in rows}
    ratios = sorted(
        by_round[(i, names[0])]["wall_s"] / by_round[(i, names[1])]["wall_s"]
        for i in range(args.rounds)
    )
    print(
        "Beam (2 local workers) / single process throughput per round "
        f"(wall): {' '.join(f'{x:.2f}' for x in ratios)}; median "
        f"{statistics.median(ratios):.2f}x [{ratios[0]:.2f}, {ratios[-1]:.2f}] "
        f"over {args.rounds} rounds"
    )
    print(
        "Reproduce: python benchmarks/shard_building.py "
        + " ".join(sys.argv[1:])
    )
    print("Commands run:")
    for command in plan.values():
        print("  " + " ".join(command))


def _last_json(log_path):
    """The JSON summary that build_shards.py prints last."""
    with open(log_path, errors="replace") as f:
        text = f.read()
    start = text.rfind("\n{")
    return json.loads(
        text[start + 1 :] if start >= 0 else text[text.find("{") :]
    )


if __name__ == "__main__":
    main()
