r"""Reader throughput: `pretraining_dataset` sequences/s at seq_length=512
with dynamic masking, on this machine's cores.

Builds dynamic shards (max_seq_length=512) from the embedded gensim Wikipedia
sample once, then times batches drawn from `pretraining_dataset` after a
warm-up: parsing, padding, dynamic masking, shuffling and prefetching are all
included; the consumer only pulls the batches (as a training loop would).

Usage:
  python benchmarks/reader_throughput.py [--batch_size=64] [--batches=400]
      [--work_dir=/tmp/tupe_bench_reader]
"""

import argparse
import datetime
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seq_length", type=int, default=512)
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--batches", type=int, default=400)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--work_dir", default="/tmp/tupe_bench_reader")
    args = parser.parse_args()

    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    import data_pipeline  # pylint: disable=g-import-not-at-top
    from data_pipeline import shards  # pylint: disable=g-import-not-at-top
    from data_pipeline import vocab as vocab_lib  # pylint: disable=g-import-not-at-top

    os.makedirs(args.work_dir, exist_ok=True)
    vocab_file = os.path.join(args.work_dir, "vocab.txt")
    if not os.path.exists(vocab_file):
        vocab_lib.build_vocabulary(None, 16000, vocab_file, lowercase=True)
    shard_dir = os.path.join(args.work_dir, f"shards_{args.seq_length}")
    if not os.path.exists(os.path.join(shard_dir, "manifest.json")):
        shards.build_shards(
            shards.ShardConfig(
                vocab_file=vocab_file,
                output_dir=shard_dir,
                max_seq_length=args.seq_length,
                num_shards=8,
                lowercase=True,
                overwrite=True,
            )
        )
    manifest = data_pipeline.read_manifest(shard_dir)

    load_before = os.getloadavg()
    results = {}
    for deterministic in (False, True):
        ds = data_pipeline.pretraining_dataset(
            shard_dir,
            vocab_file,
            seq_length=args.seq_length,
            batch_size=args.batch_size,
            is_training=True,
            seed=1,
            deterministic=deterministic,
        )
        iterator = iter(ds)
        for _ in range(args.warmup):
            next(iterator)
        start = time.perf_counter()
        real_tokens = 0
        for _ in range(args.batches):
            features, _, _ = next(iterator)
            real_tokens += int(tf.reduce_sum(features["padding_mask"]))
        elapsed = time.perf_counter() - start
        sequences = args.batches * args.batch_size
        results[deterministic] = sequences / elapsed
        print(
            f"deterministic={deterministic}: {sequences} sequences in "
            f"{elapsed:.2f} s = {sequences / elapsed:,.0f} seq/s "
            f"({real_tokens / elapsed:,.0f} real tokens/s)",
            flush=True,
        )

    print()
    print(
        f"Reader throughput, {datetime.date.today()}, {os.cpu_count()} cores,"
        f" seq_length={args.seq_length}, batch_size={args.batch_size}, "
        f"dynamic masking, {manifest['num_examples']} examples in "
        f"{len(manifest['shards'])} shards (fill ratio "
        f"{manifest['stats']['fill_ratio']:.3f}), repeated"
    )
    print(
        f"| mode | seq/s |\n|---|---|\n| default | {results[False]:,.0f} |\n"
        f"| deterministic | {results[True]:,.0f} |"
    )
    print(
        "Machine load average (1 min) before/after: "
        f"{load_before[0]:.1f} / {os.getloadavg()[0]:.1f}"
    )
    print("Target: >= 3,000 seq/s.")
    print(
        "Reproduce: python benchmarks/reader_throughput.py "
        + " ".join(sys.argv[1:])
    )


if __name__ == "__main__":
    main()
