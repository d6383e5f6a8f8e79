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

from tupe_tf.utils import process_startup

process_startup.quiet_tensorflow()  # Before TensorFlow loads.

from tupe_tf.training import config as config_lib  # noqa: E402
from tupe_tf.training import finetune  # noqa: E402
from tupe_tf.utils import cli  # noqa: E402
from tupe_tf.utils import config_flags  # noqa: E402

config_flags.define_flags(config_lib.GlueConfig)


def print_summary(results):
    print(
        f"\nGLUE {results['task']}: best learning rate "
        f"{results['best_learning_rate']}"
    )
    print(json.dumps(results["best"], indent=2))
    print(f"  results: {results['results_file']}")


def main(argv):
    del argv
    config = config_flags.config_from_flags(config_lib.GlueConfig)
    return cli.run_main(finetune.run_glue, config, print_summary)


if __name__ == "__main__":
    cli.run(main)
