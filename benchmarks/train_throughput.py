r"""Pre-training throughput: the `run_pretraining` fit loop vs plain keras-hub.

Measures sequences/s of

  * `bert_masked_lm`: a plain `keras_hub.models.BertMaskedLM` of the same
    dims, compiled with a plain `keras.optimizers.AdamW`, plain `fit`;
  * `tupe_loop[<encoding>]`: the model, optimizer (AdamW with the
    warm-up/decay schedule and weight-decay exclusions) and callbacks
    (TensorBoard logger, NaN guard) that `run_pretraining` uses, with
    `--position_encoding=bert` (same maths as BERT: the loop's overhead) and
    `tupe-r` (the default model),

all fed the SAME cached batches, in the same process, measured in
interleaved rounds (A, B, C, A, B, C, ...) so that load from other processes
hits all of them alike; the median over rounds is reported. Then, for the
default model, the settings: XLA (`jit_compile`), `steps_per_execution`, and
feeding straight from the shard reader with and without the final
`prefetch`.

  python benchmarks/train_throughput.py --work_dir=./runs/default

Prints a Markdown table and writes it, with the raw numbers, to --output.
"""

import json
import os
import statistics
import sys
import time

from absl import app
from absl import flags

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

FLAGS = flags.FLAGS
flags.DEFINE_string(
    "work_dir", "./runs/default", "Default-data directory (vocab + shards)."
)
flags.DEFINE_string("model_size", "tiny", "Model size.")
flags.DEFINE_integer("seq_length", 128, "Sequence length.")
flags.DEFINE_integer("global_batch_size", 32, "Batch size.")
flags.DEFINE_integer("steps_per_round", 40, "Timed steps per measurement.")
flags.DEFINE_integer("rounds", 5, "Interleaved rounds (median reported).")
flags.DEFINE_integer(
    "num_batches", 20, "Distinct cached batches fed to every model."
)
flags.DEFINE_string(
    "output", "benchmarks/results/train_throughput.json", "Where results go."
)
flags.DEFINE_boolean(
    "settings", True, "Also measure XLA / steps_per_execution / prefetch."
)


class _EpochTimer:
    """Times the steps of one fit epoch, excluding fit's own start-up.

    Records wall time and this process's CPU time (all threads): on a shared
    machine the CPU time per step is much less sensitive to other processes.
    """

    def __init__(self):
        import keras

        class Timer(keras.callbacks.Callback):
            def on_train_batch_end(inner, batch, logs=None):
                now = (time.perf_counter(), time.process_time(), batch)
                if inner.first is None:
                    inner.first = now
                inner.last = now

            def on_epoch_begin(inner, epoch, logs=None):
                inner.first = None
                inner.last = None

        self.callback = Timer()

    def rates(self):
        """(steps per wall second, steps per CPU second)."""
        (w0, c0, b0), (w1, c1, b1) = self.callback.first, self.callback.last
        return (b1 - b0) / (w1 - w0), (b1 - b0) / (c1 - c0)


def main(argv):
    del argv
    import keras
    import keras_hub
    import tensorflow as tf

    import data_pipeline
    from data_pipeline import default_data
    from tupe_tf.training import config as config_lib
    from tupe_tf.training.callbacks import NonFiniteLossGuard
    from tupe_tf.training.callbacks import TrainingLogger
    from tupe_tf.training.pretrain_data import vocabulary_size
    from tupe_tf.training.pretrain_model import build_masked_lm
    from tupe_tf.training.pretrain_model import compile_masked_lm

    data = default_data.prepare_default_data(
        FLAGS.work_dir, seq_length=FLAGS.seq_length
    )
    vocab_size = vocabulary_size(data.vocab_file)
    batch = FLAGS.global_batch_size

    def reader(prefetch=True):
        ds = data_pipeline.pretraining_dataset(
            data.train_files,
            data.vocab_file,
            FLAGS.seq_length,
            batch,
            seed=0,
        )
        return ds.prefetch(tf.data.AUTOTUNE) if prefetch else ds

    cached = reader().take(FLAGS.num_batches).cache().repeat()
    for _ in cached.take(FLAGS.num_batches):
        pass  # Fill the cache before anything is timed.

    def pretrain_config(encoding, jit=False, spe=1):
        return config_lib.PretrainConfig(
            seq_length=FLAGS.seq_length,
            global_batch_size=batch,
            num_train_steps=10**6,
            model=config_lib.ModelConfig(
                model_size=FLAGS.model_size, position_encoding=encoding
            ),
            runtime=config_lib.RuntimeConfig(
                jit_compile=jit, steps_per_execution=spe
            ),
        )

    log_dir = os.path.join(FLAGS.work_dir, "benchmark_logs")

    def tupe_loop(encoding, jit=False, spe=1):
        config = pretrain_config(encoding, jit, spe)
        keras.utils.set_random_seed(0)
        model = compile_masked_lm(build_masked_lm(config, vocab_size), config)
        callbacks = [NonFiniteLossGuard(), TrainingLogger(log_dir, 20, batch)]
        return model, callbacks

    def bert_masked_lm():
        dims = config_lib.MODEL_SIZES[FLAGS.model_size]
        keras.utils.set_random_seed(0)
        backbone = keras_hub.models.BertBackbone(
            vocab_size, max_sequence_length=512, dropout=0.1, **dims
        )
        model = keras_hub.models.BertMaskedLM(backbone, preprocessor=None)
        model.compile(
            optimizer=keras.optimizers.AdamW(
                1e-4, weight_decay=0.01, epsilon=1e-6, global_clipnorm=1.0
            ),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            weighted_metrics=[keras.metrics.SparseCategoricalAccuracy()],
        )
        return model, []

    def measure(entries):
        """Interleaved rounds; returns {name: {"wall"|"cpu": [sequences/s]}}."""
        timers = {name: _EpochTimer() for name in entries}
        results = {name: {"wall": [], "cpu": []} for name in entries}
        for name, (model, callbacks, dataset, spe) in entries.items():
            # Warm-up: tracing and compilation are not throughput.
            model.fit(
                dataset,
                steps_per_epoch=2 * spe,
                epochs=1,
                verbose=0,
                callbacks=callbacks,
            )
        for round_index in range(FLAGS.rounds):
            for name, (model, callbacks, dataset, spe) in entries.items():
                steps = FLAGS.steps_per_round // spe * spe
                model.fit(
                    dataset,
                    steps_per_epoch=steps,
                    epochs=1,
                    verbose=0,
                    callbacks=callbacks + [timers[name].callback],
                )
                # Batch indices count steps, so this is steps (not executions).
                wall, cpu = timers[name].rates()
                results[name]["wall"].append(wall * batch)
                results[name]["cpu"].append(cpu * batch)
            print(
                f"round {round_index + 1}/{FLAGS.rounds}: "
                + ", ".join(
                    f"{name} {values['wall'][-1]:.1f}/{values['cpu'][-1]:.1f}"
                    for name, values in results.items()
                ),
                flush=True,
            )
        return results

    report = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": "python " + " ".join(sys.argv),
        "model_size": FLAGS.model_size,
        "seq_length": FLAGS.seq_length,
        "global_batch_size": batch,
        "cpu_count": os.cpu_count(),
        "load_average_at_start": os.getloadavg(),
    }

    print("== Same batches: plain keras-hub BERT vs the pre-training loop ==")
    main_entries = {}
    model, callbacks = bert_masked_lm()
    main_entries["bert_masked_lm"] = (model, callbacks, cached, 1)
    for encoding in ("bert", "tupe-r"):
        model, callbacks = tupe_loop(encoding)
        main_entries[f"tupe_loop[{encoding}]"] = (model, callbacks, cached, 1)
    comparison = measure(main_entries)
    del main_entries

    settings = {}
    if FLAGS.settings:
        print("== Settings, default model (tupe-r) ==")
        entries = {}
        for jit in (False, True):
            for spe in (1, 8):
                model, callbacks = tupe_loop("tupe-r", jit, spe)
                entries[f"jit={jit},spe={spe},cached"] = (
                    model,
                    callbacks,
                    cached,
                    spe,
                )
        model, callbacks = tupe_loop("tupe-r")
        entries["jit=False,spe=1,reader+prefetch"] = (
            model,
            callbacks,
            reader(True),
            1,
        )
        model, callbacks = tupe_loop("tupe-r")
        entries["jit=False,spe=1,reader,no prefetch"] = (
            model,
            callbacks,
            reader(False),
            1,
        )
        settings = measure(entries)

    def row(name, values, base):
        wall = statistics.median(values["wall"])
        cpu = statistics.median(values["cpu"])
        return (
            f"| {name} | {wall:.1f} | {min(values['wall']):.1f}-{max(values['wall']):.1f} | "
            f"{wall / base['wall']:.3f} | {cpu:.1f} | {cpu / base['cpu']:.3f} |"
        )

    def medians(values):
        return {k: statistics.median(v) for k, v in values.items()}

    header = (
        "| {} | seq/s wall (median) | wall range | wall ratio | seq per CPU-s (median) | CPU ratio |\n"
        "| --- | --- | --- | --- | --- | --- |"
    )
    base = medians(comparison["bert_masked_lm"])
    lines = [
        f"Throughput, {FLAGS.model_size} (seq {FLAGS.seq_length}, batch {batch}), "
        f"{report['date']}, {os.cpu_count()} CPUs, load average at start "
        f"{report['load_average_at_start'][0]:.1f}, median of {FLAGS.rounds} interleaved "
        f"rounds of {FLAGS.steps_per_round} steps; ratios vs the first row",
        "",
        header.format("setup (same cached batches)"),
    ]
    lines += [row(name, values, base) for name, values in comparison.items()]
    if settings:
        default = medians(settings["jit=False,spe=1,cached"])
        lines += ["", header.format("setting (tupe-r)")]
        lines += [
            row(name, values, default) for name, values in settings.items()
        ]
    table = "\n".join(lines)
    print(table)
    report.update(comparison=comparison, settings=settings, table=table)
    os.makedirs(os.path.dirname(os.path.abspath(FLAGS.output)), exist_ok=True)
    with open(FLAGS.output, "w") as f:
        json.dump(report, f, indent=2)
    print(f"Written to {FLAGS.output}")


if __name__ == "__main__":
    app.run(main)
