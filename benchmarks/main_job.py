r"""The README's main job against plain keras-hub, each in fresh processes.

Each round runs, in a shuffled order, one fresh process per case:

  * `main_job`: `scripts/pretrain.py` as the README runs it (default
    flags, the default data already built in `--work_dir`), cut to
    `--num_train_steps` steps: the exact `run_pretraining` loop on the real
    shard reader;
  * `main_job_xla`: the same with `--jit_compile`;
  * `main_job_bert`: the same with `--position_encoding=bert` (BERT's
    maths, so its ratio to `keras_hub` is the loop's and the reader's
    cost alone);
  * `keras_hub`: a plain `keras_hub.models.BertMaskedLM` of the same dims
    (`--position_encoding=bert` maths, no position-encoding extras),
    plain AdamW, plain `fit(verbose=0)`, on cached batches of the same
    reader (the input costs it nothing).

A case's steady step is the median over `--log_every`-step windows after
the first (tracing) of the window's time per step: for the main job the
run's own TensorBoard `steps_per_second` scalars (checkpoints and
evaluation fall outside its windows), for keras-hub a callback that reads
the clock only. Reported: each case's median [min, max] over the rounds
(its process-to-process spread) and the per-round ratio to `keras_hub`.

  python benchmarks/main_job.py --work_dir=./runs/default --rounds=9

Prints a Markdown table and writes it, with the raw numbers, to --output.
"""

import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import harness  # noqa: E402
from absl import app  # noqa: E402
from absl import flags  # noqa: E402

FLAGS = harness.define_round_flags(rounds=9)
flags.DEFINE_string(
    "work_dir", "./runs/default", "Default-data directory (vocab + shards)."
)
flags.DEFINE_integer(
    "num_train_steps", 160, "Steps per process.", lower_bound=1
)
flags.DEFINE_integer("log_every", 20, "Steps per timed window.")
flags.DEFINE_list(
    "cases", ["keras_hub", "main_job", "main_job_xla"], "Cases to run."
)
flags.DEFINE_string(
    "child", None, "Internal: run this case's training in this process."
)
flags.DEFINE_string(
    "output", "benchmarks/results/main_job.json", "Where results go."
)
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEQ_LENGTH = 128
BATCH_SIZE = 32
MAIN_JOB_FLAGS = {
    "main_job": [],
    "main_job_xla": ["--jit_compile"],
    "main_job_bert": ["--position_encoding=bert"],
}


def steady_step(window_seconds):
    """Median seconds per step over the windows after the first."""
    return statistics.median(window_seconds[1:])


def main_job_windows(model_dir):
    """Seconds per step of each logged window of a finished main job."""
    import tensorflow as tf

    steps_per_second = {}
    for path in glob.glob(os.path.join(model_dir, "logs", "train", "*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                if value.tag == "steps_per_second":
                    number = tf.make_ndarray(value.tensor)
                    steps_per_second[event.step] = float(number)
    return [1 / steps_per_second[s] for s in sorted(steps_per_second)]


def run_main_job(name):
    """One fresh `scripts/pretrain.py` process; its `Timing` per step."""
    windows, child = pretrain_process(
        MAIN_JOB_FLAGS[name], FLAGS.num_train_steps, FLAGS.log_every
    )
    return record(name, windows, child)


def pretrain_process(extra_flags, num_train_steps, log_every):
    """Runs `scripts/pretrain.py` with `extra_flags` on the default data of
    `--work_dir` in a fresh process and a fresh `--model_dir`; returns its
    logged windows (seconds per step) and its `harness.ChildRun`."""
    with tempfile.TemporaryDirectory() as model_dir:
        command = [
            sys.executable,
            os.path.join(REPO, "scripts", "pretrain.py"),
            f"--work_dir={FLAGS.work_dir}",
            f"--model_dir={model_dir}",
            f"--num_train_steps={num_train_steps}",
            f"--log_every={log_every}",
            *extra_flags,
        ]
        child = harness.time_process(command, os.path.join(model_dir, "log"))
        return main_job_windows(model_dir), child


def run_keras_hub(name):
    """One fresh process of this file's `--child=keras_hub`."""
    with tempfile.TemporaryDirectory() as scratch:
        command = [
            sys.executable,
            os.path.abspath(__file__),
            "--child=keras_hub",
            f"--work_dir={FLAGS.work_dir}",
            f"--num_train_steps={FLAGS.num_train_steps}",
            f"--log_every={FLAGS.log_every}",
        ]
        child = harness.time_process(command, os.path.join(scratch, "log"))
    return record(name, child.last_json()["window_seconds"], child)


PROCESSES = []


def record(name, windows, child):
    """Keeps the process's numbers for the JSON; returns its steady step
    as a `Timing` (CPU: the whole process's CPU time per step)."""
    PROCESSES.append(
        {
            "case": name,
            "window_seconds": windows,
            "process_seconds": child.timing.wall,
            "process_cpu_seconds": child.timing.cpu,
            "peak_rss_mb": child.peak_rss_mb,
        }
    )
    return harness.Timing(
        steady_step(windows), child.timing.cpu / FLAGS.num_train_steps
    )


def keras_hub_child():
    """Trains plain keras-hub `BertMaskedLM` on cached reader batches and
    prints `{"window_seconds": [...]}`."""
    import keras
    import keras_hub

    import data_pipeline
    from data_pipeline import default_data
    from tupe_tf.utils.backbone_options import MODEL_SIZES

    data = default_data.prepare_default_data(
        FLAGS.work_dir, seq_length=SEQ_LENGTH
    )
    dataset = data_pipeline.pretraining_dataset(
        data.train_files, data.vocab_file, SEQ_LENGTH, BATCH_SIZE, seed=0
    )
    cached = dataset.take(20).cache().repeat()
    keras.utils.set_random_seed(0)
    backbone = keras_hub.models.BertBackbone(
        data_pipeline.load_vocabulary(data.vocab_file).size,
        max_sequence_length=512,
        dropout=0.1,
        **MODEL_SIZES["tiny"],
    )
    model = keras_hub.models.BertMaskedLM(backbone, preprocessor=None)
    model.compile(
        optimizer=keras.optimizers.AdamW(
            1e-4, weight_decay=0.01, epsilon=1e-6, global_clipnorm=1.0
        ),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        weighted_metrics=[keras.metrics.SparseCategoricalAccuracy()],
    )
    clock = WindowClock(FLAGS.log_every)
    model.fit(
        cached,
        steps_per_epoch=FLAGS.num_train_steps,
        callbacks=[clock],
        verbose=0,
    )
    print(json.dumps({"window_seconds": clock.window_seconds}))


def WindowClock(every):
    """A callback that only reads the clock every `every` steps; it is
    `async_safe`, so it leaves `fit`'s asynchronous callback dispatch (and
    so plain keras-hub's speed) as it is."""
    import keras

    class Clock(keras.callbacks.Callback):
        async_safe = True

        def __init__(self):
            super().__init__()
            self.window_seconds = []
            self.last = None

        def on_train_batch_end(self, batch, logs=None):
            if (batch + 1) % every:
                return
            now = time.perf_counter()
            if self.last is not None:
                self.window_seconds.append((now - self.last) / every)
            else:
                self.window_seconds.append(float("nan"))
            self.last = now

    return Clock()


def build_default_data():
    """Builds (or finds) the default data of `--work_dir` in a child
    process, before and outside every timing."""
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from data_pipeline import default_data; "
            "default_data.prepare_default_data(sys.argv[1], seq_length=128)",
            FLAGS.work_dir,
        ],
        check=True,
    )


def table_rows(samples):
    reference = samples["keras_hub"] if "keras_hub" in samples else None
    rows = []
    for name, timings in samples.items():
        summary = harness.summarize(timings, reference=reference)
        ms = summary.wall.map(lambda t: t * 1000)
        ratio = summary.wall_ratio.format(".3f") if reference else "-"
        rss = [p["peak_rss_mb"] for p in PROCESSES if p["case"] == name]
        rows.append(
            [
                name,
                ms.format(".0f"),
                f"{ms.high / ms.low:.2f}",
                ratio,
                f"{statistics.median(rss):.0f}",
            ]
        )
    return rows


def main(argv):
    del argv
    if FLAGS.child == "keras_hub":
        return keras_hub_child()
    build_default_data()
    runners = {
        "keras_hub": run_keras_hub,
        **dict.fromkeys(MAIN_JOB_FLAGS, run_main_job),
    }
    cases = {name: (lambda n=name: runners[n](n)) for name in FLAGS.cases}
    start = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    machine = harness.machine()
    samples = harness.run_rounds(cases, FLAGS.rounds)
    table = harness.print_table(
        f"Steady step, tiny model, length {SEQ_LENGTH}, batch {BATCH_SIZE}, "
        f"{FLAGS.num_train_steps} steps per process, {FLAGS.rounds} "
        f"interleaved rounds of fresh processes; {start}, {machine}",
        [
            "case",
            "ms per step, median [min, max] over processes",
            "max / min",
            "per-round ratio to keras_hub",
            "peak RSS MB",
        ],
        table_rows(samples),
    )
    harness.write_json(
        FLAGS.output, samples, processes=PROCESSES, date=start, table=table
    )


if __name__ == "__main__":
    app.run(main)
