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

from absl import app
from absl import flags
from absl import logging as absl_logging

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tupe_tf.training import config as config_lib  # noqa: E402
from tupe_tf.training import runtime_flags  # noqa: E402

FLAGS = flags.FLAGS

# Model.
flags.DEFINE_enum(
    "model_size", "tiny", sorted(config_lib.MODEL_SIZES), "BERT dimensions."
)
flags.DEFINE_integer("num_layers", None, "Overrides --model_size.")
flags.DEFINE_integer("num_heads", None, "Overrides --model_size.")
flags.DEFINE_integer("hidden_dim", None, "Overrides --model_size.")
flags.DEFINE_integer("intermediate_dim", None, "Overrides --model_size.")
flags.DEFINE_float("dropout", 0.1, "Dropout rate.")
flags.DEFINE_integer("max_sequence_length", 512, "Position table size.")
flags.DEFINE_integer("num_segments", 2, "Segment vocabulary size.")
flags.DEFINE_enum(
    "position_encoding",
    "tupe-r",
    list(config_lib.POSITION_ENCODINGS),
    "Position encoding.",
)
flags.DEFINE_boolean("untie_cls", True, "TUPE: untie [CLS] from positions.")
flags.DEFINE_enum(
    "segment_encoding",
    "input",
    list(config_lib.SEGMENT_ENCODINGS),
    "Segment encoding.",
)
flags.DEFINE_integer(
    "position_rank", None, "DIET-ABS rank (default: head size)."
)
flags.DEFINE_enum(
    "position_sharing",
    None,
    list(config_lib.POSITION_SHARINGS),
    "DIET sharing.",
)
flags.DEFINE_integer("relative_buckets", 32, "Relative-position buckets.")
flags.DEFINE_integer(
    "relative_max_distance", 128, "Relative-position max distance."
)

# Data.
flags.DEFINE_list(
    "train_files",
    [],
    "Training shard patterns (default: built from the embedded corpus).",
)
flags.DEFINE_list("eval_files", [], "Evaluation shard patterns.")
flags.DEFINE_string(
    "vocab_file", None, "Vocabulary the shards were built with."
)
flags.DEFINE_string(
    "work_dir", "./runs/default", "Where default data (and model_dir) go."
)
flags.DEFINE_integer("seq_length", 128, "Sequence length of the shards.")
flags.DEFINE_integer(
    "max_predictions_per_seq", None, "Masked positions per sequence."
)
flags.DEFINE_float("mask_rate", 0.15, "Fraction of tokens masked.")
flags.DEFINE_integer("seed", 0, "Data order, masking and initialisation seed.")
flags.DEFINE_integer("shuffle_buffer", 10000, "Shuffle buffer in examples.")

# Optimisation (TUPE Table 2 defaults).
flags.DEFINE_float("learning_rate", 1e-4, "Peak learning rate.")
flags.DEFINE_integer(
    "warmup_steps", None, "Warm-up steps (overrides --warmup_ratio)."
)
flags.DEFINE_float(
    "warmup_ratio", 0.01, "Warm-up as a fraction of --num_train_steps."
)
flags.DEFINE_float(
    "weight_decay", 0.01, "AdamW weight decay (not on LayerNorm/biases)."
)
flags.DEFINE_float("beta_1", 0.9, "Adam beta_1.")
flags.DEFINE_float("beta_2", 0.999, "Adam beta_2.")
flags.DEFINE_float("epsilon", 1e-6, "Adam epsilon.")
flags.DEFINE_float("clipnorm", 1.0, "Global gradient-norm clip (0 disables).")
flags.DEFINE_integer("num_train_steps", 2000, "Total optimizer steps.")
flags.DEFINE_integer("global_batch_size", 32, "Batch summed over replicas.")

# Runtime.
runtime_flags.define_runtime_flags()

# Outputs.
flags.DEFINE_string(
    "model_dir", None, "Checkpoints, logs, preset (default: <work_dir>/model)."
)
flags.DEFINE_integer("save_every", 200, "Checkpoint interval in steps.")
flags.DEFINE_integer(
    "eval_every",
    1000,
    "Evaluation interval in steps, rounded up to a multiple of --save_every (0: end only).",
)
flags.DEFINE_integer("eval_steps", 20, "Batches per evaluation.")
flags.DEFINE_integer("log_every", 20, "TensorBoard interval in steps.")
flags.DEFINE_integer("keep_checkpoints", 3, "Checkpoints kept.")
flags.DEFINE_integer(
    "verbose", 1, "Keras progress: 1 bar, 2 one line per epoch, 0 silent."
)


def config_from_flags():
    """A `PretrainConfig` from the parsed flags."""
    return config_lib.PretrainConfig(
        model_dir=FLAGS.model_dir or os.path.join(FLAGS.work_dir, "model"),
        train_files=FLAGS.train_files,
        eval_files=FLAGS.eval_files,
        vocab_file=FLAGS.vocab_file,
        work_dir=FLAGS.work_dir,
        seq_length=FLAGS.seq_length,
        max_predictions_per_seq=FLAGS.max_predictions_per_seq,
        mask_rate=FLAGS.mask_rate,
        global_batch_size=FLAGS.global_batch_size,
        num_train_steps=FLAGS.num_train_steps,
        save_every=FLAGS.save_every,
        eval_every=FLAGS.eval_every,
        eval_steps=FLAGS.eval_steps,
        log_every=FLAGS.log_every,
        keep_checkpoints=FLAGS.keep_checkpoints,
        seed=FLAGS.seed,
        shuffle_buffer=FLAGS.shuffle_buffer,
        verbose=FLAGS.verbose,
        model=config_lib.ModelConfig(
            model_size=FLAGS.model_size,
            num_layers=FLAGS.num_layers,
            num_heads=FLAGS.num_heads,
            hidden_dim=FLAGS.hidden_dim,
            intermediate_dim=FLAGS.intermediate_dim,
            dropout=FLAGS.dropout,
            max_sequence_length=FLAGS.max_sequence_length,
            num_segments=FLAGS.num_segments,
            position_encoding=FLAGS.position_encoding,
            untie_cls=FLAGS.untie_cls,
            segment_encoding=FLAGS.segment_encoding,
            position_rank=FLAGS.position_rank,
            position_sharing=FLAGS.position_sharing,
            relative_buckets=FLAGS.relative_buckets,
            relative_max_distance=FLAGS.relative_max_distance,
        ),
        optimizer=config_lib.OptimizerConfig(
            learning_rate=FLAGS.learning_rate,
            warmup_steps=FLAGS.warmup_steps,
            warmup_ratio=FLAGS.warmup_ratio,
            weight_decay=FLAGS.weight_decay,
            beta_1=FLAGS.beta_1,
            beta_2=FLAGS.beta_2,
            epsilon=FLAGS.epsilon,
            clipnorm=FLAGS.clipnorm or None,
        ),
        runtime=runtime_flags.runtime_config_from_flags(),
    )


def main(argv):
    del argv
    # TF's own INFO lines (e.g. on every checkpoint) would break the progress bar.
    logging.getLogger("tensorflow").setLevel(logging.WARNING)
    absl_logging.set_verbosity(absl_logging.WARNING)
    config = config_from_flags()
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
