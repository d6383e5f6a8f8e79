r"""Reader throughput: `pretraining_dataset` sequences/s at seq_length=512
with dynamic masking, on this machine's cores.

Builds dynamic shards (max_seq_length=512) from the embedded gensim Wikipedia
sample once, then times batches drawn from `pretraining_dataset` after a
warm-up: parsing, padding, dynamic masking, shuffling and prefetching are all
included; the consumer only pulls the batches (as a training loop would).
The default reader, the deterministic one and the default one with
whole-word masking are the cases; each round builds each one afresh, warms
it up and times `--batches` batches.

Usage:
  python benchmarks/reader_throughput.py [--rounds=9] [--batch_size=64]
      [--batches=400] [--work_dir=/tmp/tupe_bench_reader]

Smoke run: --seq_length=128 --batch_size=8 --batches=20 --warmup=2
--rounds=2 --work_dir=/tmp/rt_smoke
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import harness  # noqa: E402
from absl import app  # noqa: E402
from absl import flags  # noqa: E402

FLAGS = harness.define_round_flags(rounds=9)
flags.DEFINE_integer("seq_length", 512, "Sequence length.", lower_bound=8)
flags.DEFINE_integer("batch_size", 64, "Sequences per batch.", lower_bound=1)
flags.DEFINE_integer(
    "batches", 400, "Timed batches per case and round.", lower_bound=1
)
flags.DEFINE_integer(
    "warmup", 30, "Untimed batches first in each round.", lower_bound=0
)
flags.DEFINE_string("work_dir", "/tmp/tupe_bench_reader", "Vocab, shards.")
flags.DEFINE_string("output", None, "Also write the results as JSON here.")


def build_shards():
    """Vocabulary and dynamic shards of the embedded sample (built once)."""
    from data_pipeline import shards  # pylint: disable=g-import-not-at-top
    from data_pipeline import vocab  # pylint: disable=g-import-not-at-top

    os.makedirs(FLAGS.work_dir, exist_ok=True)
    vocab_file = os.path.join(FLAGS.work_dir, "vocab.txt")
    if not os.path.exists(vocab_file):
        vocab.build_vocabulary(None, 16000, vocab_file, lowercase=True)
    shard_dir = os.path.join(FLAGS.work_dir, f"shards_{FLAGS.seq_length}")
    if not os.path.exists(os.path.join(shard_dir, "manifest.json")):
        shards.build_shards(
            shards.ShardConfig(
                vocab_file=vocab_file,
                output_dir=shard_dir,
                max_seq_length=FLAGS.seq_length,
                num_shards=8,
                lowercase=True,
                overwrite=True,
            )
        )
    return shard_dir, vocab_file


def reader_case(shard_dir, vocab_file, deterministic, whole_word_masking=False):
    """A fresh reader per unit: `--warmup` batches, then `--batches` timed
    (with the sum of the padding mask, the real tokens)."""
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    import data_pipeline  # pylint: disable=g-import-not-at-top

    def unit():
        iterator = iter(
            data_pipeline.pretraining_dataset(
                shard_dir,
                vocab_file,
                seq_length=FLAGS.seq_length,
                batch_size=FLAGS.batch_size,
                is_training=True,
                seed=1,
                deterministic=deterministic,
                whole_word_masking=whole_word_masking,
            )
        )
        for _ in range(FLAGS.warmup):
            next(iterator)
        real_tokens = []

        def step():
            features, _, _ = next(iterator)
            real_tokens.append(int(tf.reduce_sum(features["padding_mask"])))

        timing = harness.time_steps(step, FLAGS.batches)
        seconds = timing.wall * FLAGS.batches
        print(
            f"deterministic={deterministic}, "
            f"whole_word_masking={whole_word_masking}: "
            f"{FLAGS.batch_size / timing.wall:,.0f} seq/s "
            f"({sum(real_tokens) / seconds:,.0f} real tokens/s)",
            flush=True,
        )
        return timing

    return unit


def print_report(samples, manifest):
    def row(name):
        summary = harness.summarize(samples[name])
        rate = summary.wall.map(lambda t: FLAGS.batch_size / t)
        return [
            name,
            rate.format(",.0f"),
            f"{FLAGS.batch_size / summary.cpu.median:,.0f}",
        ]

    harness.print_table(
        f"Reader throughput, seq_length={FLAGS.seq_length}, batch_size="
        f"{FLAGS.batch_size}, dynamic masking, {manifest['num_examples']} "
        f"examples in {len(manifest['shards'])} shards (fill ratio "
        f"{manifest['stats']['fill_ratio']:.3f}), repeated; median [min, "
        f"max] of {FLAGS.rounds} interleaved rounds of {FLAGS.batches} "
        f"batches after {FLAGS.warmup} warm-up batches, {harness.machine()}:",
        ["mode", "seq/s", "seq per CPU-s (median)"],
        [row(name) for name in samples],
        align=[None, "right", "right"],
    )
    ratio = harness.summarize(
        samples["deterministic"], reference=samples["default"]
    )
    print(
        "deterministic / default time per batch, per round: wall "
        f"{ratio.wall_ratio.format()}, CPU {ratio.cpu_ratio.format()}"
    )
    ratio = harness.summarize(
        samples["whole_word_masking"], reference=samples["default"]
    )
    print(
        "whole_word_masking / default time per batch, per round: wall "
        f"{ratio.wall_ratio.format()}, CPU {ratio.cpu_ratio.format()}"
    )
    print("Target: >= 3,000 seq/s.")


def main(argv):
    del argv
    import data_pipeline  # pylint: disable=g-import-not-at-top

    shard_dir, vocab_file = build_shards()
    cases = {
        "default": reader_case(shard_dir, vocab_file, deterministic=False),
        "deterministic": reader_case(shard_dir, vocab_file, deterministic=True),
        "whole_word_masking": reader_case(
            shard_dir, vocab_file, deterministic=False, whole_word_masking=True
        ),
    }
    samples = harness.run_rounds(cases, FLAGS.rounds)
    print_report(samples, data_pipeline.read_manifest(shard_dir))
    harness.write_json(FLAGS.output, samples)


if __name__ == "__main__":
    app.run(main)
