"""The default pre-training data: the embedded Wikipedia sample, tokenised.

Used when `scripts/pretrain.py` (or the compare study) runs without data
flags: builds a WordPiece vocabulary and MLM shards from the gensim Wikipedia
sample under a work directory, or reuses them when they are already there and
match.
"""

import dataclasses
import os

from absl import logging

from data_pipeline import manifest as manifest_lib
from data_pipeline import shard_verification
from data_pipeline import shards
from data_pipeline import vocab as vocab_lib
from tupe_tf.utils import fileio
from tupe_tf.utils.errors import UserError

DEFAULT_VOCAB_SIZE = 8192
DEFAULT_NUM_SHARDS = 8


@dataclasses.dataclass
class DefaultData:
    """Paths of the default data.

    Attributes:
        vocab_file: the WordPiece vocabulary.
        shard_dir: directory of the shards and their `manifest.json`.
        train_files: all shards but the last.
        eval_files: the last shard, held out for evaluation.
    """

    vocab_file: str
    shard_dir: str
    train_files: list
    eval_files: list


def shard_files(directory):
    """The shard files in `directory`, sorted (a build's temporaries left
    out)."""
    return sorted(
        os.path.join(directory, name)
        for name in os.listdir(directory)
        if ".tfrecord" in name and not name.endswith(".tmp")
    )


def build_uncased_shards(
    input_patterns, vocab_file, output_dir, seq_length, num_shards, **settings
):
    """Packs `input_patterns` (`None`: the embedded corpus) into
    `num_shards` lowercased shards of `seq_length` in `output_dir`,
    replacing any there; returns `shard_files(output_dir)`.

    Args:
        settings: further `ShardConfig` fields (e.g. `seed`).
    """
    shards.build_shards(
        shards.ShardConfig(
            input_patterns=input_patterns,
            vocab_file=vocab_file,
            output_dir=output_dir,
            max_seq_length=seq_length,
            num_shards=num_shards,
            lowercase=True,
            overwrite=True,
            **settings,
        )
    )
    return shard_files(output_dir)


def _existing_shards_match(shard_dir, vocab_file, seq_length):
    try:
        manifest = manifest_lib.read_manifest(shard_dir)
    except (OSError, ValueError):
        return False
    if int(manifest.get("max_seq_length", -1)) != seq_length:
        return False
    files = shard_files(shard_dir)
    if len(files) < 2:
        return False
    try:
        shard_verification.check_shards_vocabulary(files, vocab_file)
    except (ValueError, OSError):
        return False
    return True


def _learn_vocabulary(vocab_size, vocab_file):
    logging.info("Building a %d-token vocabulary in %s", vocab_size, vocab_file)
    print(
        f"Building the vocabulary from the embedded Wikipedia sample: {vocab_file}"
    )
    vocab_lib.build_vocabulary(None, vocab_size, vocab_file, lowercase=True)


def prepare_default_data(
    work_dir,
    seq_length=128,
    vocab_size=DEFAULT_VOCAB_SIZE,
    num_shards=DEFAULT_NUM_SHARDS,
    seed=12345,
    vocab_file=None,
):
    """Builds (or reuses) a vocabulary and shards from the embedded corpus.

    Args:
        work_dir: directory for `vocab.txt` and `shards_<seq_length>/`.
        seq_length: packed sequence length of the shards.
        vocab_size: WordPiece vocabulary size (an upper bound).
        num_shards: shard files; the last one is held out for evaluation.
        seed: shard-building seed.
        vocab_file: the user's (uncased) vocabulary to build the shards
            with instead of learning one; checked like any vocabulary (its
            special tokens, and the corpus' `[UNK]` share when the shards
            are built). Its shards go to `shards_<seq_length>_<its hash>/`.

    Returns:
        A `DefaultData`.

    Example:

    >>> data = prepare_default_data("./runs/default", seq_length=128)
    >>> data.eval_files
    ['./runs/default/shards_128/pretrain-00007-of-00008.tfrecord']
    """
    if num_shards < 2:
        raise UserError("num_shards must be >= 2 (one shard is held out).")
    os.makedirs(work_dir, exist_ok=True)
    if vocab_file is None:
        vocab_file = os.path.join(work_dir, "vocab.txt")
        shard_dir = os.path.join(work_dir, f"shards_{seq_length}")
        if not os.path.isfile(vocab_file):
            _learn_vocabulary(vocab_size, vocab_file)
    else:
        vocab_lib.load_vocabulary(vocab_file)
        digest = fileio.file_sha256(vocab_file)[:12]
        shard_dir = os.path.join(work_dir, f"shards_{seq_length}_{digest}")
    if not _existing_shards_match(shard_dir, vocab_file, seq_length):
        print(
            f"Building {num_shards} shards of length {seq_length}: {shard_dir}"
        )
        build_uncased_shards(
            None, vocab_file, shard_dir, seq_length, num_shards, seed=seed
        )
    else:
        print(f"Reusing the vocabulary {vocab_file} and shards in {shard_dir}")
    files = shard_files(shard_dir)
    return DefaultData(
        vocab_file=vocab_file,
        shard_dir=shard_dir,
        train_files=files[:-1],
        eval_files=files[-1:],
    )
