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

from absl import app
from absl import flags
from absl import logging as absl_logging

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tupe_tf.training import config as config_lib  # noqa: E402
from tupe_tf.training import runtime_flags  # noqa: E402

FLAGS = flags.FLAGS

flags.DEFINE_enum(
    "task",
    "sst2",
    list(config_lib.GLUE_TASKS),
    "GLUE task (mnli reports matched and mismatched).",
)
flags.DEFINE_string(
    "preset", None, "Pre-trained preset directory (from scripts/pretrain.py)."
)
flags.DEFINE_string(
    "output_dir", "./runs/glue", "Where <task>/results.json goes."
)
flags.DEFINE_string(
    "glue_dir",
    None,
    "Official-layout GLUE TSV directory (default: TFDS glue/<task>).",
)
flags.DEFINE_string("tfds_data_dir", None, "TFDS data directory.")
flags.DEFINE_integer("seq_length", 128, "Tokens per example (pairs included).")
flags.DEFINE_list(
    "learning_rates", ["2e-5", "3e-5", "4e-5", "5e-5"], "Learning rates swept."
)
flags.DEFINE_list(
    "seeds",
    ["0", "1", "2", "3", "4"],
    "Seeds per learning rate (median reported).",
)
flags.DEFINE_integer("batch_size", 32, "Batch size.")
flags.DEFINE_integer("num_epochs", 10, "Epochs (the paper uses 5 or 10).")
flags.DEFINE_float("warmup_ratio", 0.06, "Warm-up fraction of the total steps.")
flags.DEFINE_float(
    "weight_decay", 0.01, "AdamW weight decay (not on LayerNorm/biases)."
)
flags.DEFINE_float("dropout", 0.1, "Classifier dropout.")
flags.DEFINE_integer(
    "max_train_examples", None, "Cap on training examples (quick runs)."
)
flags.DEFINE_integer(
    "max_eval_examples", None, "Cap on dev examples (quick runs)."
)
runtime_flags.define_runtime_flags()
flags.DEFINE_integer(
    "verbose", 2, "Keras progress: 1 bar, 2 one line per epoch, 0 silent."
)


def config_from_flags():
    try:
        learning_rates = [float(v) for v in FLAGS.learning_rates]
        seeds = [int(v) for v in FLAGS.seeds]
    except ValueError as error:
        raise app.UsageError(f"--learning_rates/--seeds: {error}")
    return config_lib.GlueConfig(
        task=FLAGS.task,
        preset=FLAGS.preset,
        output_dir=FLAGS.output_dir,
        glue_dir=FLAGS.glue_dir,
        tfds_data_dir=FLAGS.tfds_data_dir,
        seq_length=FLAGS.seq_length,
        learning_rates=learning_rates,
        seeds=seeds,
        batch_size=FLAGS.batch_size,
        num_epochs=FLAGS.num_epochs,
        warmup_ratio=FLAGS.warmup_ratio,
        weight_decay=FLAGS.weight_decay,
        dropout=FLAGS.dropout,
        max_train_examples=FLAGS.max_train_examples,
        max_eval_examples=FLAGS.max_eval_examples,
        verbose=FLAGS.verbose,
        runtime=runtime_flags.runtime_config_from_flags(),
    )


def main(argv):
    del argv
    # TF's own INFO lines (e.g. on every checkpoint) would break the progress bar.
    logging.getLogger("tensorflow").setLevel(logging.WARNING)
    absl_logging.set_verbosity(absl_logging.WARNING)
    config = config_from_flags()
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
