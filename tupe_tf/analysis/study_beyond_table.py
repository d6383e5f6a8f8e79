"""Held-out loss past the position tables: length-free options, RoPE scaling.

Every model of the study is built for the longest of `eval_lengths` (its
position tables end there). An option whose weights do not depend on that
length (`PositionEncoding.length_free`: rope, alibi, sinusoidal, nope,
kerple-log, fire, shaw) is rebuilt longer from its trained preset and evaluated at
`beyond_table_lengths` too. `rope` is also evaluated at every length past
the training length with each length scaling (linear interpolation, NTK,
YaRN; factor = length / training length), so the table shows what each
extends without retraining. Table-bound options have no entry past their
tables.

Example:

>>> from tupe_tf.analysis.study_config import CompareConfig
>>> longer_lengths(CompareConfig())
[128, 256, 512]
"""

import dataclasses

from tupe_tf.analysis import study_data
from tupe_tf.analysis.study_config import VARIANTS
from tupe_tf.models.position_encodings import POSITION_ENCODING_TABLE
from tupe_tf.utils.backbone_options import ROPE_SCALINGS

SCALED_KEY = "rope_scaled_loss_by_length"


@dataclasses.dataclass
class BeyondTableData:
    """The held-out shards of every evaluation length.

    Attributes:
        vocab_file: the study's vocabulary.
        files: `{length: [shard]}` of `eval_lengths` and
            `beyond_table_lengths`.
        fingerprint: sha256 of the vocabulary and the beyond-table shards.
    """

    vocab_file: str
    files: dict
    fingerprint: str


def is_length_free(variant):
    """Whether a variant's trained model can be rebuilt for longer inputs."""
    encoding = VARIANTS[variant]["position_encoding"]
    return POSITION_ENCODING_TABLE[encoding].length_free


def scalings(variant):
    """The RoPE length scalings evaluated for `variant` (only plain rope)."""
    if VARIANTS[variant] != {"position_encoding": "rope"}:
        return []
    return [s for s in ROPE_SCALINGS if s != "none"]


def longer_lengths(config):
    """Every evaluation length past the training length."""
    lengths = config.eval_lengths + config.beyond_table_lengths
    return [n for n in lengths if n > config.pretrain.seq_length]


def missing(config, record):
    """Whether a pre-training record lacks an evaluation `config` asks for."""
    variant = record["variant"]
    if not is_length_free(variant):
        return False
    by_length = record["heldout_loss_by_length"]
    scaled = record.get(SCALED_KEY, {})
    return any(
        str(n) not in by_length for n in config.beyond_table_lengths
    ) or any(
        str(n) not in scaled.get(scaling, {})
        for scaling in scalings(variant)
        for n in longer_lengths(config)
    )


def _loss(config, model, data, length, **overrides):
    overrides["max_sequence_length"] = max(length, max(config.eval_lengths))
    return study_data.evaluate_mlm(
        study_data.rebuilt(model, overrides),
        data.files[length],
        data.vocab_file,
        length,
    )["loss"]


def _scaling_arguments(config, scaling, length):
    """The rope backbone arguments of `scaling` at `length`."""
    arguments = {
        "rope_scaling": scaling,
        "rope_scaling_factor": length / config.pretrain.seq_length,
    }
    if scaling == "yarn":
        arguments["rope_trained_length"] = config.pretrain.seq_length
    return arguments


def evaluate(config, variant, model, data):
    """The fields a length-free variant's record gains (`{}` for others).

    Args:
        config: the `CompareConfig`.
        variant: a key of `VARIANTS`.
        model: the trained `TupeMaskedLM` (rebuilt longer, not changed).
        data: a `BeyondTableData` with the held-out shards of every length.

    Returns:
        `heldout_loss_by_length` entries past the tables, rope's
        `rope_scaled_loss_by_length` (`{scaling: {length: loss}}`) and the
        fingerprint of the data they were measured on.
    """
    if not is_length_free(variant):
        return {}
    by_length = {
        str(n): _loss(config, model, data, n)
        for n in config.beyond_table_lengths
    }
    scaled = {
        scaling: {
            str(n): _loss(
                config,
                model,
                data,
                n,
                **_scaling_arguments(config, scaling, n),
            )
            for n in longer_lengths(config)
        }
        for scaling in scalings(variant)
    }
    fields = {
        "heldout_loss_by_length": by_length,
        "beyond_table_fingerprint": data.fingerprint,
    }
    if scaled:
        fields[SCALED_KEY] = scaled
    return fields


def add_to_record(record, fields):
    """`record` with `evaluate`'s fields merged in (lengths added)."""
    merged = dict(record, **fields)
    merged["heldout_loss_by_length"] = {
        **record["heldout_loss_by_length"],
        **fields.get("heldout_loss_by_length", {}),
    }
    return merged
