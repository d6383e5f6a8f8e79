r"""Vocabulary learning: the `tokenizers` learner vs TF-Text's, side by side.

Corpora are generated (not one file repeated): paragraphs of the embedded
gensim Wikipedia sample in a seeded random order, each word replaced with
probability `--perturb` by a perturbed variant (a letter substituted,
inserted or dropped, or two words joined), so the number of distinct words
grows with the corpus like in real text. Each run is
`scripts/build_vocab.py --vocab_size=8192 --lowercase --learner=...` in a
fresh child process; wall time is the whole process, peak RSS comes from
`os.wait4` of that child. Rounds interleave the learners; the slow TF-Text
learner runs only in the first `--tf_text_rounds` rounds.

Quality on held-out text (WikiText-2 valid under ../shared/data when present):
word pieces per word and the `[UNK]` rate of TF-Text's `FastBertTokenizer`
with each learner's 8k vocabulary from the smallest corpus.

TF-Text's learner is slow enough that a many-round comparison can be
spread over several sittings: with `--runs_log=FILE`, every finished run is
appended to FILE as one JSON line, and a rerun with the same FILE skips the
(size, learner, round) runs already in it (for the same generated corpus).
Ratios are reported per round (TF-Text / tokenizers, both measured back to
back in that round), as median [min, max] over the rounds both learners ran.

Usage (from the checkout, with PYTHONPATH=$PWD):
  python benchmarks/vocab_learning.py [--sizes_mb=32,128] [--rounds=9]
      [--tf_text_rounds=3] [--work_dir=/tmp/tupe_bench_vocab]
      [--runs_log=benchmarks/results/vocab_learning_runs.jsonl]
"""

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

HELD_OUT = os.path.join(
    os.path.dirname(ROOT), "shared", "data", "wikitext-2", "valid.txt"
)
_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _perturbed(word, rng):
    kind = rng.randrange(4)
    i = rng.randrange(len(word) + 1)
    if kind == 0 and i < len(word):  # substitute
        return word[:i] + rng.choice(_LETTERS) + word[i + 1 :]
    if kind == 1:  # insert
        return word[:i] + rng.choice(_LETTERS) + word[i:]
    if kind == 2 and len(word) > 3 and i < len(word):  # drop
        return word[:i] + word[i + 1 :]
    return word + rng.choice(_LETTERS) + rng.choice(_LETTERS)


def generate_corpus(path, size_mb, perturb=0.05, seed=0):
    """Writes about `size_mb` MB of perturbed Wikipedia paragraphs."""
    from data_pipeline import corpus  # pylint: disable=g-import-not-at-top

    meta_path = path + ".json"
    if os.path.exists(meta_path):
        with open(meta_path) as f:
            return json.load(f)
    paragraphs = []
    for _, article in corpus.iter_embedded_articles():
        paragraphs.extend(article)
    rng = random.Random(seed)
    target = size_mb << 20
    written = 0
    distinct = set()
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        while written < target:
            doc = []
            for _ in range(rng.randint(3, 12)):
                words = rng.choice(paragraphs).split(" ")
                doc.append(
                    " ".join(
                        _perturbed(w, rng)
                        if w.isalpha() and rng.random() < perturb
                        else w
                        for w in words
                    )
                )
            text = "\n".join(doc) + "\n\n"
            distinct.update(text.split())
            f.write(text)
            written += len(text.encode("utf-8"))
    os.replace(tmp, path)
    meta = {"bytes": written, "distinct_space_separated_words": len(distinct)}
    with open(meta_path, "w") as f:
        json.dump(meta, f)
    return meta


def run_learner(learner, corpus_path, vocab_path, vocab_size):
    """One fresh `build_vocab.py` process: wall s, peak RSS MB, its JSON."""
    command = [
        sys.executable,
        os.path.join(ROOT, "scripts", "build_vocab.py"),
        f"--input={corpus_path}",
        f"--vocab_size={vocab_size}",
        f"--output={vocab_path}",
        "--lowercase",
        f"--learner={learner}",
    ]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)
    start = time.time()
    with open(vocab_path + ".log", "w") as log:
        proc = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=log, env=env, text=True
        )
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.time() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{command} failed; see {vocab_path}.log")
    return {
        "wall_s": round(wall, 2),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
        "result": json.loads(out),
    }


def held_out_quality(vocab_path, text_path, lowercase=True):
    """Word pieces per word and [UNK] rate of FastBertTokenizer on a file."""
    from data_pipeline import vocab as vocab_lib

    with open(vocab_path, encoding="utf-8") as f:
        tokens = f.read().splitlines()
    with open(text_path, encoding="utf-8") as f:
        lines = [line for line in f.read().splitlines() if line.strip()]
    fast = vocab_lib.fast_bert_tokenizer(tokens, lowercase, "string")
    pieces = fast.tokenize(lines)
    if pieces.shape.rank == 3:
        pieces = pieces.merge_dims(1, 2)
    flat = pieces.flat_values.numpy()
    words = sum(1 for p in flat if not p.startswith(b"##"))
    unk = sum(1 for p in flat if p == b"[UNK]")
    return {
        "words": words,
        "pieces": len(flat),
        "pieces_per_word": round(len(flat) / words, 4),
        "unk_pct": round(100 * unk / len(flat), 4),
    }


def load_runs_log(path):
    """{(size_mb, learner, round): run} from a `--runs_log` file."""
    done = {}
    if path and os.path.exists(path):
        with open(path) as f:
            for line in f:
                if line.strip():
                    run = json.loads(line)
                    done[(run["size_mb"], run["learner"], run["round"])] = run
    return done


def per_round_ratios(runs, key):
    """TF-Text / tokenizers `key` per round both ran: median, min, max."""
    fast = {r["round"]: r[key] for r in runs["tokenizers"]}
    ratios = sorted(
        r[key] / fast[r["round"]] for r in runs["tf_text"] if r["round"] in fast
    )
    if not ratios:
        return None
    return {
        "rounds": len(ratios),
        "median": round(statistics.median(ratios), 2),
        "min": round(ratios[0], 2),
        "max": round(ratios[-1], 2),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes_mb", default="32,128")
    parser.add_argument(
        "--rounds",
        default="9",
        help="tokenizers rounds per size (comma-separated, one per size).",
    )
    parser.add_argument(
        "--tf_text_rounds",
        default="3",
        help="TF-Text rounds per size (comma-separated, one per size).",
    )
    parser.add_argument("--vocab_size", type=int, default=8192)
    parser.add_argument("--work_dir", default="/tmp/tupe_bench_vocab")
    parser.add_argument("--output_json", default=None)
    parser.add_argument(
        "--runs_log",
        default=None,
        help="JSON-lines file of finished runs: appended to, and runs "
        "already in it are skipped.",
    )
    args = parser.parse_args()
    done = load_runs_log(args.runs_log)
    sizes = [int(s) for s in args.sizes_mb.split(",")]
    tf_rounds = [int(s) for s in args.tf_text_rounds.split(",")]
    tf_rounds += [tf_rounds[-1]] * (len(sizes) - len(tf_rounds))
    fast_rounds = [int(s) for s in args.rounds.split(",")]
    fast_rounds += [fast_rounds[-1]] * (len(sizes) - len(fast_rounds))
    os.makedirs(args.work_dir, exist_ok=True)
    report = {"load_before": os.getloadavg(), "sizes": {}}
    for size, n_fast, n_tf in zip(sizes, fast_rounds, tf_rounds):
        corpus_path = os.path.join(args.work_dir, f"corpus-{size}mb.txt")
        meta = generate_corpus(corpus_path, size)
        runs = {"tokenizers": [], "tf_text": []}
        for r in range(max(n_fast, n_tf)):
            for learner in ("tokenizers", "tf_text"):
                limit = n_fast if learner == "tokenizers" else n_tf
                if r >= limit:
                    continue
                previous = done.get((size, learner, r))
                if previous is not None and previous["corpus"] == meta:
                    runs[learner].append(previous)
                    continue
                vocab_path = os.path.join(
                    args.work_dir, f"vocab-{size}mb-{learner}.txt"
                )
                load_before = os.getloadavg()[0]
                run = run_learner(
                    learner, corpus_path, vocab_path, args.vocab_size
                )
                run = {
                    "size_mb": size,
                    "learner": learner,
                    "round": r,
                    "wall_s": run["wall_s"],
                    "cpu_s": run["cpu_s"],
                    "peak_rss_mb": run["peak_rss_mb"],
                    "vocab_size": run["result"]["vocab_size"],
                    "load_before": load_before,
                    "load": os.getloadavg()[0],
                    "finished": time.strftime(
                        "%Y-%m-%d %H:%M:%S UTC", time.gmtime()
                    ),
                    "corpus": meta,
                }
                runs[learner].append(run)
                line = json.dumps(run)
                print(line, flush=True)
                if args.runs_log:
                    with open(args.runs_log, "a") as f:
                        f.write(line + "\n")
                        f.flush()
                        os.fsync(f.fileno())
        mb = os.path.getsize(corpus_path) / (1 << 20)
        summary = {"corpus_mb": round(mb, 1), **meta}
        for learner, learner_runs in runs.items():
            if not learner_runs:
                continue
            walls = [r["wall_s"] for r in learner_runs]
            cpus = [r["cpu_s"] for r in learner_runs]
            summary[learner] = {
                "runs": len(walls),
                "median_wall_s": round(statistics.median(walls), 2),
                "min_wall_s": min(walls),
                "max_wall_s": max(walls),
                "mb_per_s": round(mb / statistics.median(walls), 2),
                "median_cpu_s": round(statistics.median(cpus), 2),
                "mb_per_cpu_s": round(mb / statistics.median(cpus), 2),
                "max_peak_rss_mb": max(r["peak_rss_mb"] for r in learner_runs),
            }
        for key in ("wall_s", "cpu_s"):
            ratios = per_round_ratios(runs, key)
            if ratios:
                summary[f"per_round_{key[:-2]}_ratio"] = ratios
        if runs["tokenizers"] and runs["tf_text"]:
            summary["throughput_ratio"] = round(
                summary["tf_text"]["median_wall_s"]
                / summary["tokenizers"]["median_wall_s"],
                2,
            )
            summary["cpu_ratio"] = round(
                summary["tf_text"]["median_cpu_s"]
                / summary["tokenizers"]["median_cpu_s"],
                2,
            )
        report["sizes"][size] = summary
    if os.path.exists(HELD_OUT):
        size = sizes[0]
        report["held_out"] = {"file": HELD_OUT, "vocab_from_mb": size}
        for learner in ("tokenizers", "tf_text"):
            vocab_path = os.path.join(
                args.work_dir, f"vocab-{size}mb-{learner}.txt"
            )
            if os.path.exists(vocab_path):
                report["held_out"][learner] = held_out_quality(
                    vocab_path, HELD_OUT
                )
    report["load_after"] = os.getloadavg()
    text = json.dumps(report, indent=2)
    print(text)
    if args.output_json:
        with open(args.output_json, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
