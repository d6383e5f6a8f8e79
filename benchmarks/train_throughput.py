r"""Pre-training settings of the default model, on the same cached batches.

Measures sequences/s of the model, optimizer (AdamW with the warm-up/decay
schedule and weight-decay exclusions) and callbacks (TensorBoard logger,
NaN guard) that `run_pretraining` uses, `tupe-r`, all fed the SAME cached
batches in one process, in the harness's interleaved rounds: XLA
(`jit_compile`) and `steps_per_execution`, then feeding straight from the
shard reader with and without the final `prefetch`. The whole main job
against plain keras-hub, each in fresh processes, is `main_job.py`.

  python benchmarks/train_throughput.py --work_dir=./runs/default

Prints a Markdown table and writes it, with the raw numbers, to --output.
"""

import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import harness  # noqa: E402
from absl import app  # noqa: E402
from absl import flags  # noqa: E402
from model_dims import define_model_dims  # noqa: E402
from model_dims import describe_dims  # noqa: E402
from model_dims import model_dims  # noqa: E402

FLAGS = harness.define_round_flags(rounds=5, steps_per_round=40)
define_model_dims("tiny", seq_length=128, vocabulary_size=None)
flags.DEFINE_string(
    "work_dir", "./runs/default", "Default-data directory (vocab + shards)."
)
flags.DEFINE_integer("global_batch_size", 32, "Batch size.")
flags.DEFINE_integer(
    "num_batches", 20, "Distinct cached batches fed to every model."
)
flags.DEFINE_string(
    "output", "benchmarks/results/train_throughput.json", "Where results go."
)
HEADER = [
    "seq/s wall (median)",
    "wall range",
    "wall ratio",
    "seq per CPU-s (median)",
    "CPU ratio",
]


def epoch_timer():
    """A callback that keeps the first and last batch end of an epoch.

    Timing from the first batch's end leaves out `fit`'s own start-up.
    """
    import keras

    class EpochTimer(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.first = self.last = None

        def on_train_batch_end(self, batch, logs=None):
            now = (time.perf_counter(), time.process_time(), batch)
            self.first = self.first or now
            self.last = now

        def timing(self):
            """Per step: batch indices count steps, not executions."""
            (w0, c0, b0), (w1, c1, b1) = self.first, self.last
            return harness.Timing(w1 - w0, c1 - c0).per(b1 - b0)

    return EpochTimer()


def fit_case(model, callbacks, dataset, spe=1):
    """Warms `model` up (tracing is not throughput); its timed unit fits
    `steps_per_round` steps (rounded down to whole executions)."""
    fit = dict(epochs=1, verbose=0)
    model.fit(dataset, steps_per_epoch=2 * spe, callbacks=callbacks, **fit)
    timer = epoch_timer()
    steps = FLAGS.steps_per_round // spe * spe

    def unit():
        model.fit(
            dataset, steps_per_epoch=steps, callbacks=callbacks + [timer], **fit
        )
        return timer.timing()

    return unit


class Setups:
    """The models and inputs compared: the data, then a case per setup."""

    def __init__(self):
        from data_pipeline import default_data
        from data_pipeline import vocab

        self.data = default_data.prepare_default_data(
            FLAGS.work_dir, seq_length=FLAGS.seq_length
        )
        self.vocab_size = vocab.load_vocabulary(self.data.vocab_file).size
        self.cached = self.reader().take(FLAGS.num_batches).cache().repeat()
        for _ in self.cached.take(FLAGS.num_batches):
            pass  # Fill the cache before anything is timed.

    def reader(self, prefetch=True):
        import tensorflow as tf

        import data_pipeline

        dataset = data_pipeline.pretraining_dataset(
            self.data.train_files,
            self.data.vocab_file,
            FLAGS.seq_length,
            FLAGS.global_batch_size,
            seed=0,
        )
        return dataset.prefetch(tf.data.AUTOTUNE) if prefetch else dataset

    def tupe_loop(self, encoding, jit=False, spe=1, dataset=None):
        """`run_pretraining`'s model, optimizer and callbacks."""
        import keras

        from tupe_tf.training import config as config_lib
        from tupe_tf.training.callbacks import NonFiniteLossGuard
        from tupe_tf.training.callbacks import TrainingLogger
        from tupe_tf.training.pretrain_model import build_masked_lm
        from tupe_tf.training.pretrain_model import compile_masked_lm

        config = config_lib.PretrainConfig(
            seq_length=FLAGS.seq_length,
            global_batch_size=FLAGS.global_batch_size,
            num_train_steps=10**6,
            model=config_lib.ModelConfig(
                position_encoding=encoding, **model_dims()
            ),
            runtime=config_lib.RuntimeConfig(
                jit_compile=jit, steps_per_execution=spe
            ),
        )
        keras.utils.set_random_seed(0)
        model = build_masked_lm(config, self.vocab_size)
        model = compile_masked_lm(model, config)
        log_dir = os.path.join(FLAGS.work_dir, "benchmark_logs")
        callbacks = [
            NonFiniteLossGuard(),
            TrainingLogger(log_dir, 20, FLAGS.global_batch_size),
        ]
        dataset = self.cached if dataset is None else dataset
        return fit_case(model, callbacks, dataset, spe)

    def settings(self):
        cases = {}
        for jit in (False, True):
            for spe in (1, 8):
                name = f"jit={jit},spe={spe},cached"
                cases[name] = self.tupe_loop("tupe-r", jit, spe)
        cases["jit=False,spe=1,reader+prefetch"] = self.tupe_loop(
            "tupe-r", dataset=self.reader(True)
        )
        cases["jit=False,spe=1,reader,no prefetch"] = self.tupe_loop(
            "tupe-r", dataset=self.reader(False)
        )
        return cases


def table_rows(samples):
    """Sequences/s and per-round throughput ratios to the first case."""
    batch = FLAGS.global_batch_size
    reference = samples[next(iter(samples))]
    rows = []
    for name, timings in samples.items():
        summary = harness.summarize(timings, reference=reference)
        wall = summary.wall.map(lambda t: batch / t)
        cpu = summary.cpu.map(lambda t: batch / t)
        rows.append(
            [
                name,
                f"{wall.median:.1f}",
                f"{wall.low:.1f}-{wall.high:.1f}",
                f"{summary.wall_ratio.map(lambda r: 1 / r).median:.3f}",
                f"{cpu.median:.1f}",
                f"{summary.cpu_ratio.map(lambda r: 1 / r).median:.3f}",
            ]
        )
    return rows


def main(argv):
    del argv
    setups = Setups()
    results = {"settings": harness.run_rounds(setups.settings(), FLAGS.rounds)}
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    tables = [
        harness.print_table(
            f"Throughput, {describe_dims()}, batch "
            f"{FLAGS.global_batch_size}, {date}, {harness.machine()}, median "
            f"of {FLAGS.rounds} interleaved rounds of {FLAGS.steps_per_round}"
            " steps; ratios vs the first row",
            [title] + HEADER,
            table_rows(samples),
        )
        for title, samples in zip(("setting (tupe-r)",), results.values())
    ]
    harness.write_json(
        FLAGS.output,
        results,
        date=date,
        table="\n\n".join(tables),
    )


if __name__ == "__main__":
    app.run(main)
