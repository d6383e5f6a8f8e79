"""The check of the shards a training run is about to read.

`check_training_shards` runs, before anything is built, what the reader
(`pretraining_dataset`) would otherwise find mid-way: shards missing or of
another size than their manifest says, shards of another vocabulary, and
shards of longer sequences than the run's `seq_length`. Every refusal is a
`UserError` that names the flag the shards were given with.

Example:
>>> check = check_training_shards(  # doctest: +SKIP
...     ["shards/pretrain-00000-of-00001.tfrecord"], "--train_files",
...     vocab_file="vocab.txt", seq_length=128)
>>> check.files  # doctest: +SKIP
['shards/pretrain-00000-of-00001.tfrecord']
"""

from data_pipeline import check_shards_vocabulary
from data_pipeline import verify_shards
from tupe_tf.utils.errors import UserError


def _sentence(error):
    """`error`'s message ending with one period."""
    return str(error).rstrip(". ") + "."


def _verified(files, flag, skip_bad_shards):
    """`verify_shards(files, "size")`, its bad shards refused unless
    `skip_bad_shards` leaves at least one good shard."""
    try:
        check = verify_shards(files, verify="size")
    except (ValueError, OSError) as error:
        raise UserError(
            f"{flag}: {_sentence(error)} Pass shards written by "
            "scripts/build_shards.py (their directory holds manifest.json)."
        ) from error
    bad = check.bad_shards
    if bad and not skip_bad_shards:
        listing = "; ".join(f"{path}: {reason}" for path, reason in bad)
        raise UserError(
            f"{flag}: {len(bad)} bad shard(s): {listing}. "
            "Rebuild them, or pass --skip_bad_shards to train without them."
        )
    if not check.files:
        raise UserError(
            f"{flag}: no readable shard left, every one is bad: "
            f"{bad[0][0]}: {bad[0][1]}"
            f"{' (and more)' if len(bad) > 1 else ''}. Rebuild "
            "them with scripts/build_shards.py."
        )
    return check


def check_training_shards(
    files, flag, vocab_file, seq_length, skip_bad_shards=False
):
    """Refuses shards a training run could not read to the end.

    Args:
        files: the shard paths (globs expanded).
        flag: how messages name them, e.g. `"--train_files"`.
        vocab_file: the vocabulary the model uses; the shards' manifests
            must name it (same sha256).
        seq_length: the run's sequence length; shards of shorter sequences
            are padded by the reader, longer ones cannot be cut.
        skip_bad_shards: train without the shards that fail the size check
            (at least one must be good).

    Returns:
        The `ShardCheck` of the size check.

    Raises:
        UserError: naming `flag`, the shard or manifest, and what to do.
    """
    check = _verified(files, flag, skip_bad_shards)
    try:
        check_shards_vocabulary(files, vocab_file)
    except (ValueError, OSError) as error:
        raise UserError(
            f"{flag} were not built with --vocab_file={vocab_file}: {error}"
        ) from error
    shard_length = max(int(m["max_seq_length"]) for m in check.manifests)
    if shard_length > seq_length:
        raise UserError(
            f"{flag} hold sequences of length {shard_length}, longer than "
            f"--seq_length={seq_length}. Rebuild the shards with "
            f"--max_seq_length={seq_length} or pass "
            f"--seq_length={shard_length}."
        )
    return check
