"""The one place each `TupeBackbone` hyper-parameter is declared.

Every backbone argument beyond the BERT dimensions (`vocabulary_size`,
`num_layers`, `num_heads`, `hidden_dim`, `intermediate_dim`) is written here
once, with its default, its help text and, where it has them, its choices.
`tupe_tf.training.config.ModelConfig` and the scripts' flags are generated
from this table, so a new backbone option needs no edit in the training,
config or script layers.

This module imports neither TensorFlow nor Keras.

Example:

>>> from tupe_tf.utils.backbone_options import BACKBONE_OPTIONS
>>> [option.name for option in BACKBONE_OPTIONS][:2]
['dropout', 'max_sequence_length']
"""

import dataclasses
from typing import Any
from typing import Optional
from typing import Tuple

from tupe_tf.utils.settings import Range
from tupe_tf.utils.settings import at_least
from tupe_tf.utils.settings import between
from tupe_tf.utils.settings import greater_than

POSITION_ENCODINGS = (
    "bert",
    "bert-r",
    "tupe-a",
    "tupe-r",
    "bert-ad",
    "diet-abs",
    "diet-rel",
    "rope",
    "alibi",
    "sinusoidal",
    "nope",
    "kerple-log",
    "fire",
    "shaw",
)
SEGMENT_ENCODINGS = ("input", "per-head", "none")
INTERMEDIATE_ACTIVATIONS = ("gelu_approximate", "gelu")
POSITION_SHARINGS = ("layer-wise", "head-wise", "none")
CLS_RELATIVES = ("reset", "reference")
ROPE_SCALINGS = ("none", "linear", "ntk", "yarn")


@dataclasses.dataclass(frozen=True)
class BackboneOption:
    """One backbone hyper-parameter.

    Args:
        name: the keyword argument of `TupeBackbone` (and the flag name).
        default: its default value (`None` where the backbone derives it).
        value_type: `int`, `float`, `bool` or `str`.
        help: one-line help text, used by the docstring-free flag layer.
        choices: the allowed values of a string option, or `None`.
        valid: the `Range` of valid values of a numeric option, or `None`.
    """

    name: str
    default: Any
    value_type: type
    help: str
    choices: Optional[Tuple[str, ...]] = None
    valid: Optional[Range] = None

    def check(self, value):
        """Refuses a backbone argument outside its choices or range (`None`
        stands for the backbone's derived default).

        Raises:
            ValueError: naming the argument, as keras-hub's layers do.
        """
        if value is None:
            return
        if self.choices is not None and value not in self.choices:
            raise ValueError(
                f"`{self.name}` must be one of {self.choices}. Received: "
                f"{self.name}={value!r}"
            )
        if self.valid is not None and value not in self.valid:
            raise ValueError(
                f"`{self.name}` must be {self.valid}. Received: "
                f"{self.name}={value!r}"
            )


BACKBONE_OPTIONS = (
    BackboneOption(
        "dropout",
        0.1,
        float,
        "Dropout of embeddings, attention probabilities and residuals.",
        valid=between(0.0, 1.0, high_open=True),
    ),
    BackboneOption(
        "max_sequence_length",
        512,
        int,
        "Longest sequence (position table).",
        valid=at_least(1),
    ),
    BackboneOption(
        "num_segments", 2, int, "Number of segment ids.", valid=at_least(1)
    ),
    BackboneOption(
        "position_encoding",
        "tupe-r",
        str,
        "Position encoding (see docs/spec.md).",
        POSITION_ENCODINGS,
    ),
    BackboneOption(
        "untie_cls",
        True,
        bool,
        "tupe-*: untie [CLS] from positions (False: TUPE-A^{tie-cls}).",
    ),
    BackboneOption(
        "segment_encoding",
        "input",
        str,
        "input: BERT's segment embedding; per-head: DIET's segment bias; "
        "none: no segments (segment_ids ignored).",
        SEGMENT_ENCODINGS,
    ),
    BackboneOption(
        "position_rank",
        None,
        int,
        "diet-abs rank (default: head size).",
        valid=at_least(1),
    ),
    BackboneOption(
        "position_sharing",
        None,
        str,
        "diet-*: table sharing (default: layer-wise for diet-abs, none "
        "for diet-rel).",
        POSITION_SHARINGS,
    ),
    BackboneOption(
        "relative_buckets",
        32,
        int,
        "T5 relative buckets (bert-r, tupe-r; even).",
        valid=at_least(4),
    ),
    BackboneOption(
        "relative_max_distance",
        128,
        int,
        "T5 relative maximum distance (above relative_buckets / 4).",
        valid=at_least(2),
    ),
    BackboneOption(
        "rope_max_wavelength",
        10000.0,
        float,
        "rope: base wavelength of the rotary angles.",
        valid=greater_than(0),
    ),
    BackboneOption(
        "layer_norm_epsilon",
        1e-12,
        float,
        "Epsilon of the embedding and encoder LayerNorms (BERT: 1e-12; the "
        "TUPE authors' code: 1e-5).",
        valid=greater_than(0),
    ),
    BackboneOption(
        "intermediate_activation",
        "gelu_approximate",
        str,
        "Feed-forward activation: gelu_approximate (tanh form, BERT's) or "
        "gelu (exact erf form, the TUPE authors' code).",
        INTERMEDIATE_ACTIVATIONS,
    ),
    BackboneOption(
        "cls_relative",
        "reset",
        str,
        "tupe-r: reset: reset the sum v + b (paper Eq. 11); reference: the "
        "authors' code ([CLS] gets its own relative buckets).",
        CLS_RELATIVES,
    ),
    BackboneOption(
        "rope_scaling",
        "none",
        str,
        "rope: length extension at evaluation: none, linear (positions / "
        "factor), ntk (base * factor^(d/(d-2))) or yarn (see docs/spec.md).",
        ROPE_SCALINGS,
    ),
    BackboneOption(
        "rope_scaling_factor",
        1.0,
        float,
        "rope: the length extension factor s (evaluated at s times the "
        "trained length).",
        valid=at_least(1),
    ),
    BackboneOption(
        "rope_trained_length",
        None,
        int,
        "rope with yarn: the trained length T (required for yarn only).",
        valid=at_least(1),
    ),
    BackboneOption(
        "shaw_max_distance",
        128,
        int,
        "shaw: k, the largest relative distance with its own key vector.",
        valid=at_least(1),
    ),
)

OPTION_DEFAULTS = {option.name: option.default for option in BACKBONE_OPTIONS}
