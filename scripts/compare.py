"""Pre-train every position encoding on the same data and compare them.

    python scripts/compare.py --glue_dir=../shared/data/glue   # ~60 min, 2 CPU cores

Writes `<output_dir>/val_mlm_loss.png` (TUPE fig. 5a analogue),
`comparison.md` and `comparison.json` (TUPE Table 1 analogue: medians over
fine-tuning seeds).
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app  # noqa: E402
from absl import flags  # noqa: E402

from tupe_tf.analysis import compare  # noqa: E402

FLAGS = flags.FLAGS
_DEFAULTS = compare.CompareConfig()
flags.DEFINE_string("output_dir", _DEFAULTS.output_dir, "Output directory.")
flags.DEFINE_list(
    "variants",
    list(_DEFAULTS.variants),
    f"Variants, from {list(compare.VARIANTS)}.",
)
flags.DEFINE_string("model_size", _DEFAULTS.model_size, "tiny|small|base|large")
flags.DEFINE_integer("seq_length", _DEFAULTS.seq_length, "Pre-training length.")
flags.DEFINE_integer("global_batch_size", _DEFAULTS.global_batch_size, "Batch.")
flags.DEFINE_integer(
    "num_train_steps",
    _DEFAULTS.num_train_steps,
    "Pre-training steps per variant.",
)
flags.DEFINE_integer(
    "eval_interval",
    _DEFAULTS.eval_interval,
    "Steps between validation-loss points.",
)
flags.DEFINE_integer(
    "eval_steps", _DEFAULTS.eval_steps, "Validation batches per point."
)
flags.DEFINE_float("learning_rate", _DEFAULTS.learning_rate, "Pre-training LR.")
flags.DEFINE_integer("seed", _DEFAULTS.seed, "Seed of weights and data order.")
flags.DEFINE_string(
    "glue_dir",
    None,
    "GLUE TSV directory (CoLA/, SST-2/); unset: no fine-tuning.",
)
flags.DEFINE_list("glue_tasks", list(_DEFAULTS.glue_tasks), "GLUE tasks.")
flags.DEFINE_list(
    "glue_seeds",
    [str(s) for s in _DEFAULTS.glue_seeds],
    "Fine-tuning seeds (median reported).",
)
flags.DEFINE_float(
    "glue_learning_rate",
    _DEFAULTS.glue_learning_rate,
    "Fine-tuning learning rate.",
)
flags.DEFINE_integer(
    "glue_epochs", _DEFAULTS.glue_epochs, "Fine-tuning epochs."
)
flags.DEFINE_integer(
    "glue_seq_length", _DEFAULTS.glue_seq_length, "Fine-tuning sequence length."
)
flags.DEFINE_integer(
    "glue_max_train_examples",
    _DEFAULTS.glue_max_train_examples,
    "Cap on fine-tuning examples per task (0: all).",
)
flags.DEFINE_string(
    "work_dir",
    _DEFAULTS.work_dir,
    "Where the default vocabulary and shards are built.",
)


def main(argv):
    del argv
    config = compare.CompareConfig(
        output_dir=FLAGS.output_dir,
        variants=FLAGS.variants,
        model_size=FLAGS.model_size,
        seq_length=FLAGS.seq_length,
        global_batch_size=FLAGS.global_batch_size,
        num_train_steps=FLAGS.num_train_steps,
        eval_interval=FLAGS.eval_interval,
        eval_steps=FLAGS.eval_steps,
        learning_rate=FLAGS.learning_rate,
        seed=FLAGS.seed,
        glue_dir=FLAGS.glue_dir,
        glue_tasks=FLAGS.glue_tasks,
        glue_seeds=[int(s) for s in FLAGS.glue_seeds],
        glue_learning_rate=FLAGS.glue_learning_rate,
        glue_epochs=FLAGS.glue_epochs,
        glue_seq_length=FLAGS.glue_seq_length,
        glue_max_train_examples=FLAGS.glue_max_train_examples or None,
        work_dir=FLAGS.work_dir,
    )
    compare.run_comparison(config)


if __name__ == "__main__":
    app.run(main)
