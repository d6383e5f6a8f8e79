"""How each `position_encoding` builds its layers.

The encodings themselves, what each adds at the input, its attention
argument, content scale, sharings and option-specific arguments, are the
rows of `tupe_tf.utils.backbone_options.POSITION_ENCODING_TABLE` (free of
TensorFlow, for the configs and flags); a row names its content-free layer
and its per-layer query hook by a key of `LAYER_BUILDERS`, which this
module maps to the layer built from the backbone's arguments.

Adding an option: its row in `POSITION_ENCODING_TABLE`, a builder here if
it has a new layer, one layer file and its test.

Example:

>>> from tupe_tf.models.position_encodings import POSITION_ENCODING_TABLE
>>> POSITION_ENCODING_TABLE["tupe-a"].layer
'untied'
"""

import functools
import types

import keras

from tupe_tf.layers.alibi_position_bias import AlibiPositionBias
from tupe_tf.layers.diet_absolute_position_bias import DietAbsolutePositionBias
from tupe_tf.layers.diet_relative_position_bias import DietRelativePositionBias
from tupe_tf.layers.fire_position_bias import FirePositionBias
from tupe_tf.layers.initializers import seed_of
from tupe_tf.layers.initializers import with_seed_offset
from tupe_tf.layers.kerple_position_bias import KerplePositionBias
from tupe_tf.layers.relative_position_bias import RelativePositionBias
from tupe_tf.layers.rotary_position_tables import RotaryPositionTables
from tupe_tf.layers.shaw_relative_logits import ShawRelativeLogits
from tupe_tf.layers.untied_position_bias import UntiedPositionBias
from tupe_tf.layers.untied_position_offsets import UntiedPositionOffsets
from tupe_tf.utils.backbone_options import OPTION_DEFAULTS
from tupe_tf.utils.backbone_options import POSITION_ENCODING_TABLE


def bert_initializer():
    """BERT's initializer, `TruncatedNormal(stddev=0.02)`."""
    return keras.initializers.TruncatedNormal(stddev=0.02)


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
    # Seeded from the options' initializer: no seed drawn from Keras' global
    # state, so the later layers start as the other options' do.
    return KerplePositionBias(
        num_heads=args.num_heads,
        max_sequence_length=args.max_sequence_length,
        seed=seed_of(args.initializer),
        name="kerple_position_bias",
    )


def _fire(args):
    # The MLP starts as the FIRE code's (`nn.Linear`), not from BERT's
    # initializer (with it the initial bias would be about 1e-4); seeded as
    # `_kerple`.
    return FirePositionBias(
        num_heads=args.num_heads,
        max_sequence_length=args.max_sequence_length,
        seed=seed_of(args.initializer),
        name="fire_position_bias",
    )


def _shaw(args):
    # One table per layer, each with its own values (the seed offset by the
    # layer's index), as Shaw et al.'s layers draw theirs.
    return ShawRelativeLogits(
        head_dim=args.head_dim,
        max_distance=args.shaw_max_distance,
        initializer=with_seed_offset(args.initializer, args.layer_index),
        dtype=args.dtype,
        name="shaw_relative_logits",
    )


# Each kind of layer a row of `POSITION_ENCODING_TABLE` names -> its
# builder, `builder(args) -> keras.layers.Layer`; `args` has every backbone
# argument plus `head_dim`, `sharing` (resolved), `initializer`, `dtype`
# and `layer_index` (the encoder layer of a per-layer hook, else 0).
LAYER_BUILDERS = {
    "relative": _relative,
    "untied": functools.partial(_untied, relative=False),
    "untied-relative": functools.partial(_untied, relative=True),
    "untied-offsets": _untied_offsets,
    "diet-absolute": _diet_absolute,
    "diet-relative": _diet_relative,
    "rotary": _rotary,
    "alibi": _alibi,
    "kerple": _kerple,
    "fire": _fire,
    "shaw": _shaw,
}


def build_layer(kind, args, layer_index=0):
    """The layer of `kind` (a key of `LAYER_BUILDERS`) for the backbone
    `args` (and the encoder layer `layer_index` of a per-layer hook); None
    when `kind` is None (no such layer)."""
    if not kind:
        return None
    return LAYER_BUILDERS[kind](
        types.SimpleNamespace(**vars(args), layer_index=layer_index)
    )


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
