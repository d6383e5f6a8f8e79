"""Pictures of positional attention for a saved preset.

    python scripts/visualize.py --preset=runs/default/preset --output_dir=runs/figures

Writes `positional_bias.png` (per-head heat maps of the content-free bias;
TUPE fig. 6, DIET figs. 4/7) and `attention_rank.png` (numerical rank of the
attention logits with positions at the input vs per head; DIET figs. 2/8).
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app  # noqa: E402
from absl import flags  # noqa: E402

from tupe_tf.analysis import visualize  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("preset", None, "Preset directory of a TupeBackbone.")
flags.DEFINE_list(
    "baseline_presets",
    [],
    "Other presets (e.g. a `bert` one) drawn beside it in the rank figure.",
)
flags.DEFINE_string(
    "output_dir", None, "Where the PNGs go (default: <preset>/figures)."
)
flags.DEFINE_integer("sequence_length", 64, "Length of the maps and inputs.")
flags.DEFINE_integer("seed", 0, "Seed of the random token inputs.")
flags.mark_flag_as_required("preset")


def main(argv):
    del argv
    paths = visualize.visualize_preset(
        FLAGS.preset,
        output_dir=FLAGS.output_dir or os.path.join(FLAGS.preset, "figures"),
        sequence_length=FLAGS.sequence_length,
        baseline_presets=FLAGS.baseline_presets,
        seed=FLAGS.seed,
    )
    for path in paths:
        print(f"wrote {path}")


if __name__ == "__main__":
    app.run(main)
