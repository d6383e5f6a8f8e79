"""The one place each `TupeBackbone` hyper-parameter is declared.

Every backbone argument beyond the BERT dimensions (`vocabulary_size`,
`num_layers`, `num_heads`, `hidden_dim`, `intermediate_dim`) is written here
once, as a field of `BackboneOptions`, with its default, its help text and,
where it has them, its choices and range. `TupeBackbone`'s signature takes
its defaults from there, `tupe_tf.training.config.ModelConfig` inherits the
fields (and so the scripts' flags), and `BACKBONE_OPTIONS` lists them as
`BackboneOption`s, so a new backbone option needs no edit in the training,
config or script layers. `POSITION_ENCODING_TABLE` is the one list of the
`position_encoding` values, a row each saying what the option builds.

This module imports neither TensorFlow nor Keras.

Example:

>>> from tupe_tf.utils.backbone_options import BACKBONE_OPTIONS
>>> [option.name for option in BACKBONE_OPTIONS][:2]
['dropout', 'max_sequence_length']
"""

import dataclasses
import typing
from typing import Any
from typing import Optional
from typing import Tuple

from tupe_tf.utils.settings import Range
from tupe_tf.utils.settings import SettingError
from tupe_tf.utils.settings import at_least
from tupe_tf.utils.settings import between
from tupe_tf.utils.settings import check_settings
from tupe_tf.utils.settings import greater_than
from tupe_tf.utils.settings import setting
from tupe_tf.utils.settings import unwrap_optional

# BERT's published dimensions (Devlin et al. 2019; Turc et al. 2019 for the
# compact ones), `(layers, heads, hidden)`; the feed-forward width is 4x the
# hidden width in all. `tiny` is the few-minute CPU model.
MODEL_SIZES = {
    name: dict(
        num_layers=layers,
        num_heads=heads,
        hidden_dim=hidden,
        intermediate_dim=4 * hidden,
    )
    for name, (layers, heads, hidden) in {
        "tiny": (2, 2, 128),
        "mini": (4, 4, 256),
        "small": (4, 8, 512),
        "medium": (8, 8, 512),
        "base": (12, 12, 768),
        "large": (24, 16, 1024),
    }.items()
}

SEGMENT_ENCODINGS = ("input", "per-head", "none")
INTERMEDIATE_ACTIVATIONS = ("gelu_approximate", "gelu")
POSITION_SHARINGS = ("layer-wise", "head-wise", "none")
CLS_RELATIVES = ("reset", "reference")
ROPE_SCALINGS = ("none", "linear", "ntk", "yarn")


@dataclasses.dataclass(frozen=True)
class PositionEncoding:
    """One `position_encoding` value: what it builds, declared once.

    `TupeBackbone` reads this row instead of branching on the option;
    `tupe_tf.models.position_encodings` builds the layer a row names.

    Args:
        name: the `position_encoding` value.
        input_positions: add an absolute position table at the input.
        input_table: which one: `learned` (BERT's position embedding) or
            `sinusoidal` (the fixed sin/cos table of Vaswani et al.).
        scaled_tokens: the token embeddings start from `N(0, 1/D)` and
            enter the input times `sqrt(D)` (Vaswani et al.; fairseq's
            `embed_scale`), so they are not drowned by a fixed table of
            unit amplitude; a tied output layer reads the unscaled matrix.
        layer: the content-free layer (called once per forward pass on
            `token_ids`), a key of `position_encodings.LAYER_BUILDERS`, or
            None.
        attention_argument: the transformer layers' call argument that
            receives the layer's output (`attention_bias`, a bias `(units,
            1, heads, n, n)`, or a query/key transform).
        query_logits: the layer each transformer layer's attention calls
            for a position term that depends on the query (its
            `query_logits` hook), a key of `LAYER_BUILDERS`, or None.
        scale_factor: the content scale is `1/sqrt(scale_factor * d)`.
        sharings: allowed `position_sharing` values; the first is the
            default.
        arguments: the option-specific backbone arguments it accepts.
        length_free: no weight's shape depends on `max_sequence_length`, so
            a trained model can be rebuilt for longer inputs (from its
            preset with a larger `max_sequence_length`) and run there.

    Example:

    >>> POSITION_ENCODING_TABLE["tupe-a"].scale_factor
    2
    """

    name: str
    input_positions: bool = False
    input_table: str = "learned"
    scaled_tokens: bool = False
    layer: Optional[str] = None
    attention_argument: str = "attention_bias"
    query_logits: Optional[str] = None
    scale_factor: int = 1
    sharings: Tuple[str, ...] = ("layer-wise",)
    arguments: Tuple[str, ...] = ()
    length_free: bool = False

    def content_scale(self, head_dim):
        """`c`, or None for the attention's default `1/sqrt(d)`."""
        if self.scale_factor == 1:
            return None
        return 1.0 / (self.scale_factor * head_dim) ** 0.5


_RELATIVE_ARGUMENTS = ("relative_buckets", "relative_max_distance")

# The position encodings, in the order of the flags' help and the study.
# diet-abs shares one table across layers by default, diet-rel has one per
# layer (each option's first sharing is its default).
POSITION_ENCODING_TABLE = {
    entry.name: entry
    for entry in (
        PositionEncoding("bert", input_positions=True),
        PositionEncoding(
            "bert-r",
            input_positions=True,
            layer="relative",
            arguments=_RELATIVE_ARGUMENTS,
        ),
        PositionEncoding(
            "tupe-a", layer="untied", scale_factor=2, arguments=("untie_cls",)
        ),
        PositionEncoding(
            "tupe-r",
            layer="untied-relative",
            scale_factor=2,
            arguments=("untie_cls", "cls_relative") + _RELATIVE_ARGUMENTS,
        ),
        PositionEncoding(
            "bert-ad",
            layer="untied-offsets",
            attention_argument="query_key_offsets",
            scale_factor=4,
        ),
        PositionEncoding(
            "diet-abs",
            layer="diet-absolute",
            sharings=POSITION_SHARINGS,
            arguments=("position_rank",),
        ),
        PositionEncoding(
            "diet-rel",
            layer="diet-relative",
            sharings=("none",)
            + tuple(s for s in POSITION_SHARINGS if s != "none"),
        ),
        PositionEncoding(
            "rope",
            layer="rotary",
            attention_argument="rotary_tables",
            length_free=True,
            arguments=(
                "rope_max_wavelength",
                "rope_scaling",
                "rope_scaling_factor",
                "rope_trained_length",
            ),
        ),
        PositionEncoding("alibi", layer="alibi", length_free=True),
        PositionEncoding(
            "sinusoidal",
            input_positions=True,
            input_table="sinusoidal",
            scaled_tokens=True,
            length_free=True,
        ),
        PositionEncoding("nope", length_free=True),
        PositionEncoding("kerple-log", layer="kerple", length_free=True),
        PositionEncoding("fire", layer="fire", length_free=True),
        PositionEncoding(
            "shaw",
            query_logits="shaw",
            length_free=True,
            arguments=("shaw_max_distance",),
        ),
    )
}
POSITION_ENCODINGS = tuple(POSITION_ENCODING_TABLE)


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


@dataclasses.dataclass
class BackboneOptions:
    """The `TupeBackbone` arguments beyond the BERT dimensions: each one's
    default, help, choices and range (the backbone's signature takes its
    defaults from here; `ModelConfig` inherits these fields, so each is a
    flag of the training scripts).

    Example:

    >>> BackboneOptions().position_encoding
    'tupe-r'
    """

    dropout: float = setting(
        0.1,
        help="Dropout of embeddings, attention probabilities and residuals.",
        valid=between(0.0, 1.0, high_open=True),
    )
    max_sequence_length: int = setting(
        512,
        help="Longest sequence (position table).",
        valid=at_least(1),
    )
    num_segments: int = setting(
        2,
        help="Number of segment ids.",
        valid=at_least(1),
    )
    position_encoding: str = setting(
        "tupe-r",
        help="Position encoding (see docs/spec.md).",
        choices=POSITION_ENCODINGS,
    )
    untie_cls: bool = setting(
        True,
        help="tupe-*: untie [CLS] from positions (False: TUPE-A^{tie-cls}).",
    )
    segment_encoding: str = setting(
        "input",
        help=(
            "input: BERT's segment embedding; per-head: DIET's segment bias; "
            "none: no segments (segment_ids ignored)."
        ),
        choices=SEGMENT_ENCODINGS,
    )
    position_rank: Optional[int] = setting(
        None,
        help="diet-abs rank (default: head size).",
        valid=at_least(1),
    )
    position_sharing: Optional[str] = setting(
        None,
        help=(
            "diet-*: table sharing (default: layer-wise for diet-abs, none for "
            "diet-rel)."
        ),
        choices=POSITION_SHARINGS,
    )
    relative_buckets: int = setting(
        32,
        help="T5 relative buckets (bert-r, tupe-r; even).",
        valid=at_least(4),
    )
    relative_max_distance: int = setting(
        128,
        help="T5 relative maximum distance (above relative_buckets / 4).",
        valid=at_least(2),
    )
    rope_max_wavelength: float = setting(
        10000.0,
        help="rope: base wavelength of the rotary angles.",
        valid=greater_than(0),
    )
    layer_norm_epsilon: float = setting(
        1e-12,
        help=(
            "Epsilon of the embedding and encoder LayerNorms (BERT: 1e-12; the "
            "TUPE authors' code: 1e-5)."
        ),
        valid=greater_than(0),
    )
    intermediate_activation: str = setting(
        "gelu_approximate",
        help=(
            "Feed-forward activation: gelu_approximate (tanh form, BERT's) or "
            "gelu (exact erf form, the TUPE authors' code)."
        ),
        choices=INTERMEDIATE_ACTIVATIONS,
    )
    cls_relative: str = setting(
        "reset",
        help=(
            "tupe-r: reset: reset the sum v + b (paper Eq. 11); reference: the "
            "authors' code ([CLS] gets its own relative buckets)."
        ),
        choices=CLS_RELATIVES,
    )
    rope_scaling: str = setting(
        "none",
        help=(
            "rope: length extension at evaluation: none, linear (positions / "
            "factor), ntk (base * factor^(d/(d-2))) or yarn (see docs/spec.md)."
        ),
        choices=ROPE_SCALINGS,
    )
    rope_scaling_factor: float = setting(
        1.0,
        help=(
            "rope: the length extension factor s (evaluated at s times the "
            "trained length)."
        ),
        valid=at_least(1),
    )
    rope_trained_length: Optional[int] = setting(
        None,
        help="rope with yarn: the trained length T (required for yarn only).",
        valid=at_least(1),
    )
    shaw_max_distance: int = setting(
        128,
        help=(
            "shaw: k, the largest relative distance with its own key vector."
        ),
        valid=at_least(1),
    )


def check_options(options):
    """Refuses a `BackboneOptions` value outside its choices, type or range
    with the check of the settings (`check_settings`; `None` stands for the
    backbone's derived default).

    Raises:
        ValueError: naming the argument, as keras-hub's layers do.
    """
    try:
        check_settings(options)
    except SettingError as error:
        raise ValueError(
            f"`{error.name}` must be {error.requirement}. Received: "
            f"{error.name}={error.value!r}"
        ) from error


def _option(field):
    hints = typing.get_type_hints(BackboneOptions)
    return BackboneOption(
        field.name,
        field.default,
        unwrap_optional(hints[field.name]),
        field.metadata["help"],
        field.metadata["choices"],
        field.metadata["valid"],
    )


BACKBONE_OPTIONS = tuple(
    _option(field) for field in dataclasses.fields(BackboneOptions)
)
OPTION_DEFAULTS = {option.name: option.default for option in BACKBONE_OPTIONS}
