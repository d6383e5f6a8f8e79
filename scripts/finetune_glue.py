r"""Fine-tunes a pre-trained TUPE preset on a GLUE task (absl flags).

TUPE Table 2 recipe by default: learning rates {2e-5, 3e-5, 4e-5, 5e-5},
batch 32, warm-up ratio 0.06, linear decay, 10 epochs, 5 seeds, median over
seeds reported. Data from TFDS `glue/<task>` or, offline, an official-layout
GLUE TSV directory:

  python scripts/finetune_glue.py --task=cola \
      --preset=runs/default/model/preset --glue_dir=../shared/data/glue

Results go to <output_dir>/<task>/results.json.
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

config_flags.define_flags(config_lib.GlueConfig)


def main(argv):
    del argv
    # TF's own INFO lines (e.g. on every checkpoint) would break the progress bar.
    logging.getLogger("tensorflow").setLevel(logging.WARNING)
    absl_logging.set_verbosity(absl_logging.WARNING)
    config = config_flags.config_from_flags(config_lib.GlueConfig)
    from tupe_tf.training.finetune import run_glue

    try:
        results = run_glue(config)
    except config_lib.InvalidInputError as error:
        print(f"ERROR: {error}", file=sys.stderr)
        return 2
    print(
        f"\nGLUE {results['task']}: best learning rate {results['best_learning_rate']}"
    )
    print(json.dumps(results["best"], indent=2))
    print(f"  results: {results['results_file']}")
    return 0


if __name__ == "__main__":
    app.run(main)
