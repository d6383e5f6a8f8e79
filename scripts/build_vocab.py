r"""Learns a WordPiece vocabulary from text.

Example:
  python scripts/build_vocab.py --input='corpus/*.txt' --vocab_size=30522 \
      --output=vocab.txt --lowercase

The default learner is the `tokenizers` library's (fast); TF-Text's is
behind --learner=tf_text. On Apache Beam (pip install 'tupe-tf[beam]'):
  ... --runner=DirectRunner --num_partitions=4

Without --input, the embedded gensim English Wikipedia sample is used.

Input that is not text is refused with nothing written (--allow_nul_bytes
and --max_invalid_line_fraction override). Errors in the flags or files end
the run with one `ERROR:` line and exit code 2 (docs/errors.md lists
them).
"""

import json
import os
import time

# TensorFlow reads this as it loads, with the imports below: no C++ INFO,
# WARNING or ERROR lines unless the user sets it.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from data_pipeline import beam_vocab  # noqa: E402
from data_pipeline import vocab as vocab_lib  # noqa: E402
from tupe_tf.utils import cli  # noqa: E402
from tupe_tf.utils import config_flags  # noqa: E402

config_flags.define_flags(vocab_lib.VocabConfig)


def main(argv):
    del argv  # cli.run refuses arguments that are not flags.
    config = config_flags.config_from_flags(vocab_lib.VocabConfig)
    start = time.time()
    if config.runner:
        result = beam_vocab.build_from_config(config)
    else:
        result = config.build()
    result["seconds"] = round(time.time() - start, 2)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    cli.run(main)
