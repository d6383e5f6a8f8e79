"""Library side of `scripts/visualize.py`."""

import dataclasses
import os
from typing import Optional
from typing import Sequence

import numpy as np

from tupe_tf.analysis import figures
from tupe_tf.models.preset_check import check_preset
from tupe_tf.models.tupe_backbone import TupeBackbone
from tupe_tf.utils import fileio
from tupe_tf.utils.errors import UserError
from tupe_tf.utils.keyword_arguments import refuses_unknown_fields
from tupe_tf.utils.settings import Settings
from tupe_tf.utils.settings import at_least
from tupe_tf.utils.settings import setting


def random_inputs(backbone, sequence_length, batch_size=2, seed=0):
    """Random word ids (no special tokens) with `[CLS]` first, two segments."""
    rng = np.random.default_rng(seed)
    n = int(sequence_length)
    token_ids = rng.integers(5, backbone.vocabulary_size, (batch_size, n))
    token_ids[:, 0] = 2
    segment_ids = (np.arange(n)[None] >= n // 2).repeat(batch_size, 0)
    return {
        "token_ids": token_ids.astype("int32"),
        "segment_ids": segment_ids.astype("int32"),
        "padding_mask": np.ones((batch_size, n), "int32"),
    }


@refuses_unknown_fields
@dataclasses.dataclass
class VisualizeConfig(Settings):
    """What `scripts/visualize.py` draws; every field is one of its flags.

    Example:

    >>> VisualizeConfig(preset="runs/default/model/preset").figures_dir()
    'runs/default/model/preset/figures'
    """

    preset: Optional[str] = setting(
        None, help="Preset directory of a TupeBackbone.", required=True
    )
    baseline_presets: Sequence[str] = setting(
        (),
        help="Other presets (e.g. a `bert` one) drawn beside it in the rank "
        "figure.",
        element_type=str,
    )
    output_dir: Optional[str] = setting(
        None, help="Where the PNGs go (default: <preset>/figures)."
    )
    sequence_length: int = setting(
        64, help="Length of the maps and inputs.", valid=at_least(2)
    )
    seed: int = setting(
        0, help="Seed of the random token inputs.", valid=at_least(0)
    )

    def check_rules(self):
        for preset in (self.preset, *self.baseline_presets):
            if not os.path.isdir(preset):
                raise UserError(f"--preset {preset!r} is not a directory.")

    def figures_dir(self):
        return self.output_dir or os.path.join(self.preset, "figures")

    def run(self):
        """Checks the presets and the output directory, then draws the
        figures; returns the written paths."""
        self.validate()
        for preset in (self.preset, *self.baseline_presets):
            check_preset(preset)
        fileio.make_writable_directory(self.figures_dir(), "--output_dir")
        return visualize_preset(
            self.preset,
            output_dir=self.figures_dir(),
            sequence_length=self.sequence_length,
            baseline_presets=self.baseline_presets,
            seed=self.seed,
        )


def visualize_preset(
    preset, output_dir, sequence_length=64, baseline_presets=(), seed=0
):
    """Writes the positional-bias and attention-rank figures of a preset.

    Args:
        preset: preset directory of a `TupeBackbone`.
        output_dir: directory for the PNG files.
        sequence_length: int. Length of maps and inputs.
        baseline_presets: other preset directories for the rank figure.
        seed: int. Seed of the random inputs.

    Returns:
        The list of written paths.
    """
    backbones = {}
    for path in [preset, *baseline_presets]:
        check_preset(path)
        backbone = TupeBackbone.from_preset(path)
        if sequence_length > backbone.max_sequence_length:
            raise UserError(
                f"--sequence_length={sequence_length} is longer than the "
                f"max_sequence_length={backbone.max_sequence_length} of "
                f"preset {path!r}."
            )
        label = backbone.position_encoding
        backbones[label if label not in backbones else path] = backbone
    main_backbone = next(iter(backbones.values()))
    os.makedirs(output_dir, exist_ok=True)
    written = [
        figures.plot_positional_bias(
            main_backbone,
            sequence_length,
            os.path.join(output_dir, "positional_bias.png"),
        )
    ]
    ranks = {
        name: figures.attention_ranks(
            backbone, random_inputs(backbone, sequence_length, seed=seed)
        )
        for name, backbone in backbones.items()
    }
    written.append(
        figures.plot_attention_ranks(
            ranks, os.path.join(output_dir, "attention_rank.png")
        )
    )
    return written
