r"""Shard building: tupe-tf `build_shards.py` vs TF Model Garden's
`official/nlp/data/create_pretraining_data.py`, side by side in one run.

Both get the same corpus (the embedded gensim Wikipedia sample repeated to
>= 30 MB, then doubled), the same lowercase WordPiece vocabulary,
max_seq_length=128, dupe_factor=1, max_predictions_per_seq=20. Each run is
a fresh child process (`harness.time_process`: wall time, CPU time and peak
RSS); the harness interleaves the runs in shuffled rounds.

Reported per case, median [min, max] over the rounds: whole-process wall
time, CPU time, the processing time without start-up (tupe-tf: timed inside
the script after `import tensorflow`; Model Garden: first to last log line),
MB/s and tokens/s on whole-process wall time, and peak RSS; then tupe-tf's
throughput against Model Garden's, per round. Tokens are the corpus's word
pieces as counted by tupe-tf's manifest (the same vocabulary and
lowercasing for both).

Model Garden is installed at benchmark time only:
  pip install --no-deps tf-models-official   # plus tf-keras, six, sentencepiece

Scale point (`--scale_gb=1`, instead of the comparison above): a generated
corpus of that size (`synthetic_corpus.py`: perturbed Wikipedia paragraphs,
not one file repeated), built by the single-process path (dynamic masking)
and by the Beam path on 2 local worker processes (`--runner=DirectRunner
--num_partitions=2 --direct_num_workers=2
--direct_running_mode=multi_processing`, run with `--beam_python`, a Python
that has apache-beam). The Beam run's peak RSS is the largest single process
among the launcher and its workers, not their sum.

Usage (from the checkout, with PYTHONPATH=$PWD):
  python benchmarks/shard_building.py [--rounds=9] [--copies=11]
      [--work_dir=/tmp/tupe_bench_shards] [--skip_model_garden]
      [--skip_doubled]
  python benchmarks/shard_building.py --scale_gb=1 [--rounds=9]
      [--beam_python=/work/venv-beam/bin/python]

Smoke run: --copies=1 --skip_doubled --skip_model_garden --rounds=2
--vocab_size=2000 --work_dir=/tmp/sb_smoke
"""

import dataclasses
import json
import os
import re
import shutil
import sys

import harness
import synthetic_corpus
from absl import app
from absl import flags

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="1", PYTHONPATH=ROOT)
_LOG_TIME_RE = re.compile(r"^[IWE]\d{4} (\d\d):(\d\d):(\d\d\.\d+)", re.M)

FLAGS = harness.define_round_flags(rounds=9)
flags.DEFINE_integer(
    "copies",
    11,
    "Copies of the ~2.9 MB embedded sample in the 1x corpus (11: ~32 MB).",
    lower_bound=1,
)
flags.DEFINE_string("work_dir", "/tmp/tupe_bench_shards", "Corpora, shards.")
flags.DEFINE_integer("vocab_size", 16000, "Vocabulary size.", lower_bound=1)
flags.DEFINE_bool("skip_model_garden", False, "Time tupe-tf only.")
flags.DEFINE_bool("skip_doubled", False, "Leave out the 2x corpus.")
flags.DEFINE_float(
    "scale_gb",
    0,
    "Run only the scale point, on a generated corpus of this many GiB.",
    lower_bound=0,
)
flags.DEFINE_string(
    "beam_python",
    sys.executable,
    "Python with apache-beam for the scale point's Beam run.",
)
flags.DEFINE_string("output", None, "Also write the results as JSON here.")


@dataclasses.dataclass(frozen=True)
class Corpus:
    """A corpus file: `label` names it in the table; `mb` is its size in
    millions of bytes."""

    label: str
    path: str
    mb: float


class BuildCase:
    """One tool on one corpus; each call is one run in a fresh process.

    Args:
        tool: its name in the table.
        corpus: a `Corpus`.
        command: the process to run.
        read: `read(child_run, log_path)`: the run's `processing_s`,
            `examples` and, for tupe-tf, `text_tokens`.
    """

    def __init__(self, tool, corpus, command, read):
        self.tool = tool
        self.corpus = corpus
        self.command = command
        self.read = read
        name = re.sub(r"\W+", "_", f"{tool}_{corpus.label}")
        self.log_path = os.path.join(FLAGS.work_dir, f"{name}.log")
        self.runs = []

    def __call__(self):
        print(f"running {self.tool} on {self.corpus.label} ...", flush=True)
        child = harness.time_process(self.command, self.log_path, ENV)
        run = {
            "wall_s": child.timing.wall,
            "cpu_s": child.timing.cpu,
            "peak_rss_mb": child.peak_rss_mb,
            **self.read(child, self.log_path),
        }
        self.runs.append(run)
        print(json.dumps(run), flush=True)
        return child.timing

    def spread(self, key):
        """The `harness.Spread` of `key` over this case's runs."""
        return harness.Spread(tuple(run[key] for run in self.runs))


def read_tupe_tf(child, log_path):
    """From the JSON summary that build_shards.py prints last."""
    del log_path
    summary = child.last_json()
    return {
        "processing_s": summary["seconds"],
        "examples": summary["examples"],
        "text_tokens": summary["text_tokens"],
    }


def read_model_garden(child, log_path):
    """From the log: first to last absl log line (after the imports), and
    the instances it says it wrote."""
    del child
    with open(log_path, errors="replace") as f:
        log = f.read()
    times = [
        int(h) * 3600 + int(m) * 60 + float(s)
        for h, m, s in _LOG_TIME_RE.findall(log)
    ]
    found = re.findall(r"Wrote (\d+) total instances", log)
    return {
        "processing_s": times[-1] - times[0]
        if len(times) > 1
        else float("nan"),
        "examples": int(found[-1]) if found else None,
    }


def tupe_tf_command(corpus, name, *extra, python=sys.executable):
    """build_shards.py on `corpus` into `work_dir/name`."""
    return [
        python,
        os.path.join(ROOT, "scripts", "build_shards.py"),
        f"--input={corpus.path}",
        f"--vocab_file={os.path.join(FLAGS.work_dir, 'vocab.txt')}",
        f"--output_dir={os.path.join(FLAGS.work_dir, name)}",
        "--max_seq_length=128",
        "--num_shards=8",
        "--lowercase",
        "--overwrite",
        *extra,
    ]


def model_garden_command(corpus, script):
    return [
        sys.executable,
        script,
        f"--input_file={corpus.path}",
        f"--output_file={os.path.join(FLAGS.work_dir, f'mg_{corpus.label}')}"
        ".tfrecord",
        f"--vocab_file={os.path.join(FLAGS.work_dir, 'vocab.txt')}",
        "--do_lower_case=true",
        "--max_seq_length=128",
        "--dupe_factor=1",
        "--max_predictions_per_seq=20",
        "--masked_lm_prob=0.15",
        "--do_whole_word_mask=false",
        "--random_seed=12345",
    ]


def model_garden_script():
    """Model Garden's create_pretraining_data.py, or None if skipped or not
    installed."""
    if FLAGS.skip_model_garden:
        return None
    try:
        import official  # pylint: disable=g-import-not-at-top
    except ImportError:
        print(
            "Model Garden not installed: pip install --no-deps "
            "tf-models-official (skipping it)"
        )
        return None
    return os.path.join(
        os.path.dirname(official.__file__),
        "nlp",
        "data",
        "create_pretraining_data.py",
    )


def repeated_corpus(label, copies):
    """The embedded sample `copies` times over, as `Corpus` `label`."""
    from data_pipeline import corpus  # pylint: disable=g-import-not-at-top

    path = os.path.join(FLAGS.work_dir, f"corpus_{label}.txt")
    with open(path, "wb") as out:
        for _ in range(copies):
            with open(corpus.embedded_corpus_path(), "rb") as f:
                shutil.copyfileobj(f, out)
    return Corpus(label, path, os.path.getsize(path) / 1e6)


def comparison_cases():
    """tupe-tf (static masking; dynamic and static whole-word masking on
    1x) and Model Garden on the 1x and 2x corpora; the (case, reference)
    pairs of the ratio lines."""
    static = [
        "--seed=12345",
        "--static_masking",
        "--dupe_factor=1",
        "--max_predictions_per_seq=20",
    ]
    sizes = {"1x": FLAGS.copies, "2x": 2 * FLAGS.copies}
    script = model_garden_script()
    cases, pairs = {}, []
    for label in list(sizes)[: 1 if FLAGS.skip_doubled else 2]:
        corpus = repeated_corpus(label, sizes[label])
        cases[f"tupe-tf static {label}"] = BuildCase(
            "tupe-tf static",
            corpus,
            tupe_tf_command(corpus, f"ours_{label}_static", *static),
            read_tupe_tf,
        )
        if label == "1x":
            cases["tupe-tf dynamic 1x"] = BuildCase(
                "tupe-tf dynamic",
                corpus,
                tupe_tf_command(corpus, "ours_1x_dynamic", "--seed=12345"),
                read_tupe_tf,
            )
            cases["tupe-tf static whole-word 1x"] = BuildCase(
                "tupe-tf static whole-word",
                corpus,
                tupe_tf_command(
                    corpus,
                    "ours_1x_static_wwm",
                    *static,
                    "--whole_word_masking",
                ),
                read_tupe_tf,
            )
            # Target: within +10% of the time without whole-word masking.
            pairs.append(("tupe-tf static 1x", "tupe-tf static whole-word 1x"))
        if script:
            cases[f"Model Garden {label}"] = BuildCase(
                "Model Garden",
                corpus,
                model_garden_command(corpus, script),
                read_model_garden,
            )
            pairs.append((f"Model Garden {label}", f"tupe-tf static {label}"))
    return cases, pairs


def scale_cases():
    """The single process and Beam on 2 local workers, on a generated
    corpus; the (case, reference) pair of the ratio line."""
    size_mb = int(FLAGS.scale_gb * 1024)
    path = os.path.join(FLAGS.work_dir, f"synthetic_{size_mb}mb.txt")
    print(f"Generating {size_mb} MB of perturbed Wikipedia text ...")
    meta = synthetic_corpus.generate_corpus(path, size_mb)
    corpus = Corpus(
        f"generated, {meta['distinct_space_separated_words']:,} distinct words",
        path,
        os.path.getsize(path) / 1e6,
    )
    beam = [
        "--runner=DirectRunner",
        "--num_partitions=2",
        "--beam_options=--direct_num_workers=2 "
        "--direct_running_mode=multi_processing",
    ]
    cases = {
        "single process": BuildCase(
            "single process",
            corpus,
            tupe_tf_command(corpus, "scale_single"),
            read_tupe_tf,
        ),
        "Beam DirectRunner, 2 workers": BuildCase(
            "Beam DirectRunner, 2 workers",
            corpus,
            tupe_tf_command(
                corpus, "scale_beam", *beam, python=FLAGS.beam_python
            ),
            read_tupe_tf,
        ),
    }
    return cases, [("single process", "Beam DirectRunner, 2 workers")]


def learn_vocabulary():
    """The lowercase vocabulary of the embedded sample (learned once)."""
    from data_pipeline import corpus  # pylint: disable=g-import-not-at-top
    from data_pipeline import vocab  # pylint: disable=g-import-not-at-top

    path = os.path.join(FLAGS.work_dir, "vocab.txt")
    if not os.path.exists(path):
        print("Learning the vocabulary on the embedded sample ...")
        vocab.build_vocabulary(
            corpus.embedded_corpus_path(),
            FLAGS.vocab_size,
            path,
            lowercase=True,
        )
    with open(path) as f:
        return sum(1 for _ in f)


def print_startup_floor():
    """A process that only imports TensorFlow and TF-Text."""
    child = harness.time_process(
        [sys.executable, "-c", "import tensorflow, tensorflow_text"],
        os.path.join(FLAGS.work_dir, "import_only.log"),
        ENV,
    )
    print(
        "Start-up floor (import tensorflow + tensorflow_text only): "
        f"{child.timing.wall:.1f} s wall, {child.timing.cpu:.1f} s CPU, "
        f"{child.peak_rss_mb:.0f} MB peak RSS"
    )


def table_row(case, samples, tokens):
    summary = harness.summarize(samples)
    processing = case.spread("processing_s")
    rss = case.spread("peak_rss_mb")
    mb = case.corpus.mb
    return [
        case.tool,
        case.corpus.label,
        f"{mb:.1f}",
        summary.wall.format(".1f"),
        summary.cpu.format(".1f"),
        processing.format(".1f"),
        f"{mb / summary.wall.median:.2f}",
        f"{tokens[case.corpus.path] / summary.wall.median:,.0f}",
        f"{mb / processing.median:.2f}",
        f"{rss.low:.0f}-{rss.high:.0f}",
        f"{case.runs[-1]['examples']:,}",
    ]


def print_report(cases, samples, vocab_tokens):
    tokens = {
        case.corpus.path: case.runs[-1]["text_tokens"]
        for case in cases.values()
        if "text_tokens" in case.runs[-1]
    }
    harness.print_table(
        f"Shard building, max_seq_length=128, vocab {vocab_tokens} tokens "
        f"(lowercase), median [min, max] of {FLAGS.rounds} interleaved "
        f"rounds, {harness.machine()}:",
        [
            "tool",
            "corpus",
            "MB",
            "wall s",
            "CPU s",
            "processing s",
            "MB/s (wall)",
            "tokens/s (wall)",
            "MB/s (processing)",
            "peak RSS MB",
            "examples",
        ],
        [table_row(cases[name], samples[name], tokens) for name in cases],
        align=[None] * 2 + ["right"] * 9,
    )


def ratio_line(cases, samples, name, reference):
    """`reference`'s throughput over `name`'s, per round; their peak RSS."""
    ratio = harness.summarize(samples[name], reference=samples[reference])
    processing = harness.Spread(
        tuple(
            run["processing_s"] / reference_run["processing_s"]
            for run, reference_run in zip(
                cases[name].runs, cases[reference].runs
            )
        )
    )
    rounds = " ".join(f"{v:.2f}" for v in sorted(ratio.wall_ratio.values))
    return (
        f"{reference} against {name}, throughput per round, median [min, "
        f"max]: wall {ratio.wall_ratio.format()}x ({rounds}), CPU "
        f"{ratio.cpu_ratio.format()}x, processing {processing.format()}x; "
        f"peak RSS {cases[reference].spread('peak_rss_mb').high:.0f} MB "
        f"against {cases[name].spread('peak_rss_mb').high:.0f} MB"
    )


def main(argv):
    del argv
    os.makedirs(FLAGS.work_dir, exist_ok=True)
    vocab_tokens = learn_vocabulary()
    if FLAGS.scale_gb:
        cases, pairs = scale_cases()
    else:
        cases, pairs = comparison_cases()
        print_startup_floor()
    samples = harness.run_rounds(cases, FLAGS.rounds)
    print_report(cases, samples, vocab_tokens)
    for name, reference in pairs:
        print(ratio_line(cases, samples, name, reference))
    print(
        "Reproduce: python benchmarks/shard_building.py "
        + " ".join(sys.argv[1:])
    )
    print("Commands run:")
    for case in cases.values():
        print("  " + " ".join(case.command))
    harness.write_json(
        FLAGS.output,
        samples,
        runs={name: case.runs for name, case in cases.items()},
    )


if __name__ == "__main__":
    app.run(main)
