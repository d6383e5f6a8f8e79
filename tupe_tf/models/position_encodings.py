"""The option table: what each `position_encoding` builds, declared once.

`TupeBackbone` reads this table instead of branching on the option; the
option names themselves live in `tupe_tf.utils.backbone_options` (free of
TensorFlow, for the configs and flags) and must match the table's keys.

Each `PositionEncoding` says whether positions are added at the input, which
content-free layer it builds (called once per forward pass on `token_ids`)
and which attention argument of every transformer layer receives its output
(`attention_bias`, a bias `(units, 1, heads, n, n)`, or a query/key
transform), which layer each transformer layer's attention calls for a term
that depends on the query (`query_logits`), its content scale
`c = 1/sqrt(scale_factor * head_dim)`, its sharing modes (the first is the
default) and the option-specific backbone arguments it accepts.

Adding an option: one `PositionEncoding` entry here, its name in
`backbone_options.POSITION_ENCODINGS`, one layer file and its test.

Example:

>>> from tupe_tf.models.position_encodings import POSITION_ENCODING_TABLE
>>> POSITION_ENCODING_TABLE["tupe-a"].scale_factor
2
"""

import dataclasses
from typing import Callable
from typing import Optional
from typing import Tuple

import keras

from tupe_tf.layers.alibi_position_bias import AlibiPositionBias
from tupe_tf.layers.diet_absolute_position_bias import DietAbsolutePositionBias
from tupe_tf.layers.diet_relative_position_bias import DietRelativePositionBias
from tupe_tf.layers.fire_position_bias import FirePositionBias
from tupe_tf.layers.kerple_position_bias import KerplePositionBias
from tupe_tf.layers.relative_position_bias import RelativePositionBias
from tupe_tf.layers.rotary_position_tables import RotaryPositionTables
from tupe_tf.layers.shaw_relative_logits import ShawRelativeLogits
from tupe_tf.layers.untied_position_bias import UntiedPositionBias
from tupe_tf.layers.untied_position_offsets import UntiedPositionOffsets
from tupe_tf.utils.backbone_options import OPTION_DEFAULTS
from tupe_tf.utils.backbone_options import POSITION_SHARINGS


def bert_initializer():
    """BERT's initializer, `TruncatedNormal(stddev=0.02)`."""
    return keras.initializers.TruncatedNormal(stddev=0.02)


@dataclasses.dataclass(frozen=True)
class PositionEncoding:
    """One row of the option table.

    Args:
        name: the `position_encoding` value.
        input_positions: add an absolute position table at the input.
        input_table: which one: `learned` (BERT's position embedding) or
            `sinusoidal` (the fixed sin/cos table of Vaswani et al.).
        build: `build(args) -> PositionBiasLayer` or None (no content-free
            layer); `args` has every backbone argument plus `head_dim`,
            `sharing` (resolved), `initializer` and `dtype`.
        attention_argument: the transformer layers' call argument that
            receives the layer's output.
        query_logits: `query_logits(args) -> keras.layers.Layer` or None:
            one new layer per transformer layer, its attention's
            `query_logits` hook (a position term that depends on the query,
            so it cannot be a content-free bias).
        scale_factor: the content scale is `1/sqrt(scale_factor * d)`.
        sharings: allowed `position_sharing` values; the first is the
            default.
        arguments: the option-specific backbone arguments it accepts.
        length_free: no weight's shape depends on `max_sequence_length`, so
            a trained model can be rebuilt for longer inputs (from its
            preset with a larger `max_sequence_length`) and run there.
    """

    name: str
    input_positions: bool = False
    input_table: str = "learned"
    build: Optional[Callable] = None
    attention_argument: str = "attention_bias"
    query_logits: Optional[Callable] = None
    scale_factor: int = 1
    sharings: Tuple[str, ...] = ("layer-wise",)
    arguments: Tuple[str, ...] = ()
    length_free: bool = False

    def content_scale(self, head_dim):
        """`c`, or None for the attention's default `1/sqrt(d)`."""
        if self.scale_factor == 1:
            return None
        return 1.0 / (self.scale_factor * head_dim) ** 0.5


def _relative(args):
    return RelativePositionBias(
        num_heads=args.num_heads,
        max_sequence_length=args.max_sequence_length,
        num_buckets=args.relative_buckets,
        max_distance=args.relative_max_distance,
        initializer=args.initializer,
        name="relative_position_bias",
    )


def _untied(args, relative):
    return UntiedPositionBias(
        num_heads=args.num_heads,
        hidden_dim=args.hidden_dim,
        max_sequence_length=args.max_sequence_length,
        untie_cls=args.untie_cls,
        relative_buckets=args.relative_buckets if relative else None,
        relative_max_distance=args.relative_max_distance,
        cls_relative=args.cls_relative,
        initializer=args.initializer,
        name="untied_position_bias",
    )


def _untied_offsets(args):
    return UntiedPositionOffsets(
        num_heads=args.num_heads,
        hidden_dim=args.hidden_dim,
        max_sequence_length=args.max_sequence_length,
        initializer=args.initializer,
        name="untied_position_offsets",
    )


def _diet_absolute(args):
    return DietAbsolutePositionBias(
        num_layers=args.num_layers,
        num_heads=args.num_heads,
        max_sequence_length=args.max_sequence_length,
        rank=args.position_rank or args.head_dim,
        sharing=args.sharing,
        initializer=args.initializer,
        name="diet_absolute_position_bias",
    )


def _diet_relative(args):
    return DietRelativePositionBias(
        num_layers=args.num_layers,
        num_heads=args.num_heads,
        max_sequence_length=args.max_sequence_length,
        sharing=args.sharing,
        initializer=args.initializer,
        name="diet_relative_position_bias",
    )


def _rotary(args):
    return RotaryPositionTables(
        head_dim=args.head_dim,
        max_sequence_length=args.max_sequence_length,
        max_wavelength=args.rope_max_wavelength,
        scaling=args.rope_scaling,
        scaling_factor=args.rope_scaling_factor,
        trained_length=args.rope_trained_length,
        name="rotary_position_tables",
    )


def _alibi(args):
    return AlibiPositionBias(
        num_heads=args.num_heads,
        max_sequence_length=args.max_sequence_length,
        name="alibi_position_bias",
    )


def _kerple(args):
    return KerplePositionBias(
        num_heads=args.num_heads,
        max_sequence_length=args.max_sequence_length,
        name="kerple_position_bias",
    )


def _fire(args):
    return FirePositionBias(
        num_heads=args.num_heads,
        max_sequence_length=args.max_sequence_length,
        initializer=args.initializer,
        name="fire_position_bias",
    )


def _shaw(args):
    return ShawRelativeLogits(
        head_dim=args.head_dim,
        max_distance=args.shaw_max_distance,
        initializer=args.initializer,
        dtype=args.dtype,
        name="shaw_relative_logits",
    )


_RELATIVE_ARGUMENTS = ("relative_buckets", "relative_max_distance")
# diet-abs shares one table across layers by default, diet-rel has one per
# layer (each option's first sharing is its default).
_DIET_ABS_SHARINGS = POSITION_SHARINGS
_DIET_REL_SHARINGS = ("none",) + tuple(
    s for s in POSITION_SHARINGS if s != "none"
)

POSITION_ENCODING_TABLE = {
    entry.name: entry
    for entry in (
        PositionEncoding("bert", input_positions=True),
        PositionEncoding(
            "bert-r",
            input_positions=True,
            build=_relative,
            arguments=_RELATIVE_ARGUMENTS,
        ),
        PositionEncoding(
            "tupe-a",
            build=lambda args: _untied(args, relative=False),
            scale_factor=2,
            arguments=("untie_cls",),
        ),
        PositionEncoding(
            "tupe-r",
            build=lambda args: _untied(args, relative=True),
            scale_factor=2,
            arguments=("untie_cls", "cls_relative") + _RELATIVE_ARGUMENTS,
        ),
        PositionEncoding(
            "bert-ad",
            build=_untied_offsets,
            attention_argument="query_key_offsets",
            scale_factor=4,
        ),
        PositionEncoding(
            "diet-abs",
            build=_diet_absolute,
            sharings=_DIET_ABS_SHARINGS,
            arguments=("position_rank",),
        ),
        PositionEncoding(
            "diet-rel",
            build=_diet_relative,
            sharings=_DIET_REL_SHARINGS,
        ),
        PositionEncoding(
            "rope",
            build=_rotary,
            attention_argument="rotary_tables",
            length_free=True,
            arguments=(
                "rope_max_wavelength",
                "rope_scaling",
                "rope_scaling_factor",
                "rope_trained_length",
            ),
        ),
        PositionEncoding("alibi", build=_alibi, length_free=True),
        PositionEncoding(
            "sinusoidal",
            input_positions=True,
            input_table="sinusoidal",
            length_free=True,
        ),
        PositionEncoding("nope", length_free=True),
        PositionEncoding("kerple-log", build=_kerple, length_free=True),
        PositionEncoding("fire", build=_fire, length_free=True),
        PositionEncoding(
            "shaw",
            query_logits=_shaw,
            length_free=True,
            arguments=("shaw_max_distance",),
        ),
    )
}

# Backbone arguments that only some options accept (some row's `arguments`);
# the others must leave them at their default. In the option table's order.
OPTION_SPECIFIC_ARGUMENTS = tuple(
    name
    for name in OPTION_DEFAULTS
    if any(name in e.arguments for e in POSITION_ENCODING_TABLE.values())
)


def validated_encoding(options):
    """Checks the position options; returns `(table entry, sharing)`.

    Args:
        options: dict of the backbone's `BACKBONE_OPTIONS` arguments (at
            least `position_encoding`, `position_sharing` and those of
            `OPTION_SPECIFIC_ARGUMENTS` that are set); an option-specific
            argument other than its default needs an option that takes it.

    Returns:
        The `PositionEncoding` and the resolved `position_sharing` (the
        option's default when None).

    Raises:
        ValueError naming the argument, its value and what is allowed.
    """
    position_encoding = options["position_encoding"]
    entry = POSITION_ENCODING_TABLE[position_encoding]
    position_sharing = options.get("position_sharing")
    sharing = position_sharing or entry.sharings[0]
    if sharing not in entry.sharings:
        raise ValueError(
            f"`position_sharing` must be one of {entry.sharings} for "
            f"position_encoding={position_encoding!r} (only `diet-abs` and "
            f"`diet-rel` have per-layer or per-head tables). Received: "
            f"position_sharing={position_sharing!r}"
        )
    for name in OPTION_SPECIFIC_ARGUMENTS:
        value = options.get(name, OPTION_DEFAULTS[name])
        if name in entry.arguments or value == OPTION_DEFAULTS[name]:
            continue
        accepting = [
            e.name
            for e in POSITION_ENCODING_TABLE.values()
            if name in e.arguments
        ]
        raise ValueError(
            f"`{name}` only applies to {accepting}. Received: "
            f"{name}={value!r} with position_encoding={position_encoding!r}"
        )
    return entry, sharing
