r"""Fine-tunes a pre-trained TUPE preset on a GLUE task (absl flags).

Above hidden size 512, or with --recipe=tupe_paper, the TUPE authors'
recipe (guolinke/TUPE README; `PAPER_FINETUNE_*` in
tupe_tf/training/config.py): every learning rate x 5 seeds, the median over
seeds reported. A preset converted from their checkpoint
(scripts/convert_fairseq_checkpoint.py --bpe_codes) tokenizes and packs
sentences as their pipeline does. Data from TFDS `glue/<task>` or, offline,
an official-layout GLUE TSV directory:

  python scripts/finetune_glue.py --task=cola \
      --preset=runs/default/model/preset --glue_dir=../shared/data/glue

Results go to <output_dir>/<task>/results.json.
"""

import json
import os

# TensorFlow reads this as it loads, with the imports below: no C++ INFO,
# WARNING or ERROR lines unless the user sets it.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from tupe_tf.training import config as config_lib  # noqa: E402
from tupe_tf.training import distribution  # noqa: E402
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
    print(distribution.describe_devices(config.runtime.strategy), flush=True)
    return cli.run_main(finetune.run_glue, config, print_summary)


if __name__ == "__main__":
    cli.run(main)
