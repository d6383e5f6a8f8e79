"""Pictures of positional attention for a saved preset.

    python scripts/visualize.py --preset=runs/default/model/preset \
        --output_dir=runs/figures

Writes `positional_bias.png` (per-head heat maps of the content-free bias;
TUPE fig. 6, DIET figs. 4/7) and `attention_rank.png` (numerical rank of the
attention logits with positions at the input vs per head; DIET figs. 2/8).
Flags: `tupe_tf.analysis.visualize.VisualizeConfig`.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app  # noqa: E402

from data_pipeline import config_flags  # noqa: E402
from tupe_tf.analysis.visualize import VisualizeConfig  # noqa: E402

config_flags.define_flags(VisualizeConfig)


def main(argv):
    del argv
    config = config_flags.validated_config_from_flags(VisualizeConfig)
    for path in config.run():
        print(f"wrote {path}")


if __name__ == "__main__":
    app.run(main)
