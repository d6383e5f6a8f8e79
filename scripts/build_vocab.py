r"""Learns a WordPiece vocabulary from text.

Example:
  python scripts/build_vocab.py --input='corpus/*.txt' --vocab_size=30522 \
      --output=vocab.txt --lowercase

The default learner is the `tokenizers` library's (fast); TF-Text's is
behind --learner=tf_text.

Without --input, the embedded gensim English Wikipedia sample is used.
"""

import json
import os
import sys
import time

from absl import app
from absl import flags

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from data_pipeline import vocab as vocab_lib  # pylint: disable=g-import-not-at-top,wrong-import-position
from data_pipeline import wordpiece_learner  # pylint: disable=g-import-not-at-top,wrong-import-position

_INPUT = flags.DEFINE_string(
    "input",
    None,
    "Comma-separated text files or globs (.txt, .gz, .bz2), "
    "one sentence or paragraph per line, blank line between documents. "
    "Default: the embedded gensim Wikipedia sample.",
)
_VOCAB_SIZE = flags.DEFINE_integer(
    "vocab_size", 30522, "Target vocabulary size (upper bound)."
)
_OUTPUT = flags.DEFINE_string("output", None, "Vocabulary file to write.")
_LOWERCASE = flags.DEFINE_boolean(
    "lowercase", False, "Lowercase and strip accents."
)
_NUM_ITERATIONS = flags.DEFINE_integer(
    "num_iterations",
    4,
    "--learner=tf_text only: WordPiece learning iterations (TF-Text `learn`).",
)
_LEARNER = flags.DEFINE_enum(
    "learner",
    wordpiece_learner.DEFAULT_LEARNER,
    list(wordpiece_learner.LEARNERS),
    wordpiece_learner.LEARNER_HELP,
)
flags.mark_flag_as_required("output")
flags.register_validator(
    "vocab_size",
    lambda v: v > 5,
    message="--vocab_size must be larger than 5 (the reserved tokens).",
)
flags.register_validator(
    "num_iterations", lambda v: v >= 1, message="--num_iterations must be >= 1."
)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    start = time.time()
    try:
        result = vocab_lib.build_vocabulary(
            _INPUT.value,
            _VOCAB_SIZE.value,
            _OUTPUT.value,
            lowercase=_LOWERCASE.value,
            learn_params={"num_iterations": _NUM_ITERATIONS.value},
            learner=_LEARNER.value,
        )
    except (FileNotFoundError, ValueError) as e:
        sys.exit(f"build_vocab: error: {e}")
    result["seconds"] = round(time.time() - start, 2)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    app.run(main)
