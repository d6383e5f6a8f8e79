"""Pictures of positional attention for a saved preset.

    python scripts/visualize.py --preset=runs/default/model/preset \
        --output_dir=runs/figures

Writes `positional_bias.png` (per-head heat maps of the content-free bias;
TUPE fig. 6, DIET figs. 4/7) and `attention_rank.png` (numerical rank of the
attention logits with positions at the input vs per head; DIET figs. 2/8).
Flags: `tupe_tf.analysis.visualize.VisualizeConfig`.
"""

import os

# TensorFlow reads this as it loads, with the imports below: no C++ INFO,
# WARNING or ERROR lines unless the user sets it.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from tupe_tf.analysis.visualize import VisualizeConfig  # noqa: E402
from tupe_tf.utils import cli  # noqa: E402
from tupe_tf.utils import config_flags  # noqa: E402

config_flags.define_flags(VisualizeConfig)


def visualize(config):
    """Draws the figures `config` asks for; returns the written paths."""
    return config.run()


def print_paths(paths):
    for path in paths:
        print(f"wrote {path}")


def main(argv):
    del argv  # cli.run refuses arguments that are not flags.
    config = config_flags.config_from_flags(VisualizeConfig)
    return cli.run_main(visualize, config, print_paths)


if __name__ == "__main__":
    cli.run(main)
