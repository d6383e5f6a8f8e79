r"""Builds packed MLM pre-training TFRecord shards with TF-Text.

Example:
  python scripts/build_shards.py --input='corpus/*.txt' --vocab_file=vocab.txt \
      --output_dir=shards --max_seq_length=128 --num_shards=16 --seed=1 \
      --lowercase

Static (Model Garden schema) shards:
  ... --static_masking --dupe_factor=5 --max_predictions_per_seq=20

On Apache Beam (pip install 'tupe-tf[beam]'), locally on two processes:
  ... --runner=DirectRunner --num_partitions=4 \
      --beam_options='--direct_num_workers=2 --direct_running_mode=multi_processing'

Without --input, the embedded gensim Wikipedia sample is used.

Input that is not text, or a corpus with too many [UNK] tokens, is refused
with nothing written (--allow_nul_bytes, --max_invalid_line_fraction and
--max_unk_fraction override). Errors in the flags or files end the run with
one `ERROR:` line and exit code 2 (docs/errors.md lists them).
"""

import json
import os
import time

# TensorFlow reads this as it loads, with the imports below: no C++ INFO,
# WARNING or ERROR lines unless the user sets it.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from data_pipeline import beam_common  # noqa: E402
from data_pipeline import beam_shards  # noqa: E402
from data_pipeline import shards as shards_lib  # noqa: E402
from tupe_tf.utils import cli  # noqa: E402
from tupe_tf.utils import config_flags  # noqa: E402

config_flags.define_flags(shards_lib.ShardConfig)


def main(argv):
    del argv  # cli.run refuses arguments that are not flags.
    config = config_flags.config_from_flags(shards_lib.ShardConfig)
    # Wrong flags, inputs and outputs are refused before anything is built.
    shards_lib.preflight(config)
    if config.runner:
        beam_common.import_beam()

    # Timed from here: the shard building itself, without the imports.
    start = time.time()
    if config.runner:
        manifest = beam_shards.build_shards_beam(
            config,
            runner=config.runner,
            num_partitions=config.num_partitions,
            beam_options=config.beam_options,
        )
    else:
        manifest = shards_lib.build_shards(config)
    seconds = time.time() - start
    stats = manifest["stats"]
    summary = {
        "output_dir": config.output_dir,
        "engine": manifest["engine"],
        "num_partitions": manifest["num_partitions"],
        "examples": manifest["num_examples"],
        "shards": len(manifest["shards"]),
        "fill_ratio": stats["fill_ratio"],
        "text_tokens": stats["text_tokens"],
        "unk_tokens": stats["unk_tokens"],
        "invalid_utf8_lines_replaced": stats["corpus"]["invalid_utf8_lines"],
        "input_bytes": stats["corpus"]["bytes_read"],
        "seconds": round(seconds, 2),
    }
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    cli.run(main)
