"""Pictures of positional attention for a saved preset.

    python scripts/visualize.py --preset=runs/default/model/preset \
        --output_dir=runs/figures

Writes `positional_bias.png` (per-head heat maps of the content-free bias;
TUPE fig. 6, DIET figs. 4/7) and `attention_rank.png` (numerical rank of the
attention logits with positions at the input vs per head; DIET figs. 2/8).
Flags: `tupe_tf.analysis.visualize.VisualizeConfig`.
"""

from tupe_tf.utils import process_startup

process_startup.quiet_tensorflow()  # Before TensorFlow loads.

from absl import flags  # noqa: E402

from tupe_tf.analysis.visualize import VisualizeConfig  # noqa: E402
from tupe_tf.utils import cli  # noqa: E402
from tupe_tf.utils import config_flags  # noqa: E402

config_flags.define_flags(VisualizeConfig)


def visualize(flag_values):
    """Draws the figures the flags ask for; returns the written paths."""
    return config_flags.config_from_flags(VisualizeConfig, flag_values).run()


def print_paths(paths):
    for path in paths:
        print(f"wrote {path}")


def main(argv):
    del argv  # cli.run refuses arguments that are not flags.
    return cli.run_main(visualize, flags.FLAGS, print_paths)


if __name__ == "__main__":
    cli.run(main)
