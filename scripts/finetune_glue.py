r"""Fine-tunes a pre-trained TUPE preset on a GLUE task (absl flags).

Above hidden size 512, or with --recipe=tupe_paper, the TUPE authors'
recipe (guolinke/TUPE README; `PAPER_FINETUNE_*` in
tupe_tf/training/config.py): every learning rate x 5 seeds, the median over
seeds reported. A preset converted from their checkpoint
(scripts/convert_fairseq_checkpoint.py --bpe_codes) tokenizes and packs
sentences as their pipeline does. The rate is chosen on a selection split
carved from the training file (--selection_fraction); the evaluation file
is scored once, at the chosen rate. Data from TFDS `glue/<task>` or, offline,
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
    carve = results["selection_split"]
    print(
        f"\nGLUE {results['task']}: learning rate "
        f"{results['chosen_learning_rate']} chosen on the selection split "
        f"({carve['num_selection_examples']} of the "
        f"{results['num_train_examples']} training rows; trained on the "
        f"other {carve['num_fit_examples']})"
    )
    for split, name in results["evaluation_names"].items():
        print(f"  {split}, scored once at that rate: {name}")
    print(json.dumps(results["evaluation"], indent=2))
    print(f"  results: {results['results_file']}")


def main(argv):
    del argv
    config = config_flags.config_from_flags(config_lib.GlueConfig)
    print(distribution.describe_devices(config.runtime.strategy), flush=True)
    return cli.run_main(finetune.run_glue, config, print_summary)


if __name__ == "__main__":
    cli.run(main)
