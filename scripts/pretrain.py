r"""Pre-trains a TUPE/DIET BERT-style encoder with masked-LM (absl flags).

With no data flags, builds a vocabulary and shards from the embedded
Wikipedia sample under --work_dir, pre-trains a tiny TUPE-R on CPU for a few
minutes, evaluates it and saves a keras-hub preset:

  python scripts/pretrain.py

Rerunning the same command resumes from the last checkpoint in --model_dir.
See docs/training.md for every flag, multi-worker and TPU runs.
"""

import json
import logging
import os
import sys

# Quiet TensorFlow's C++ start-up chatter unless the user asked for it.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app  # noqa: E402
from absl import logging as absl_logging  # noqa: E402

from data_pipeline import config_flags  # noqa: E402
from tupe_tf.training import config as config_lib  # noqa: E402

config_flags.define_flags(config_lib.PretrainConfig)


def main(argv):
    del argv
    # TF's own INFO lines (e.g. on every checkpoint) would break the progress bar.
    logging.getLogger("tensorflow").setLevel(logging.WARNING)
    absl_logging.set_verbosity(absl_logging.WARNING)
    config = config_flags.config_from_flags(config_lib.PretrainConfig)
    # Imported after flag parsing: TensorFlow starts here, after which the
    # CPU can no longer be split into logical devices.
    from tupe_tf.training.callbacks import NonFiniteLossError
    from tupe_tf.training.pretrain import run_pretraining

    try:
        result = run_pretraining(config)
    except config_lib.InvalidInputError as error:
        # Bad input is refused before training: one clear line, no traceback.
        print(f"ERROR: {error}", file=sys.stderr)
        return 2
    except NonFiniteLossError as error:
        print(f"ERROR: {error}", file=sys.stderr)
        return 3
    results = result.results
    print("\nPre-training finished.")
    print(json.dumps(results["eval"], indent=2))
    print(f"  step:          {results['global_step']}")
    print(f"  preset:        {results['preset_dir']}")
    print(
        f"  checkpoints:   {os.path.join(results['model_dir'], 'checkpoints')}"
    )
    print(f"  TensorBoard:   tensorboard --logdir {results['tensorboard_dir']}")
    print(f"  vocabulary:    {results['vocab_file']}")
    print(
        f"  results:       {os.path.join(results['model_dir'], 'results.json')}"
    )
    return 0


if __name__ == "__main__":
    app.run(main)
