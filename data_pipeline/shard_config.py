"""`ShardConfig`: the settings of `shards.build_shards` (and of its Beam
twin), their checks, and the names of the shard files they give.

`scripts/build_shards.py`'s flags are generated from `ShardConfig`.
"""

import dataclasses
from typing import Optional

from data_pipeline import beam_common
from data_pipeline import corpus
from data_pipeline import masking
from tupe_tf.utils.errors import UserError
from tupe_tf.utils.keyword_arguments import refuses_unknown_fields
from tupe_tf.utils.settings import at_least
from tupe_tf.utils.settings import between
from tupe_tf.utils.settings import flag_name
from tupe_tf.utils.settings import refuse_ignored
from tupe_tf.utils.settings import setting

# `--compression` values and TFRecord's name for each.
_COMPRESSIONS = {None: "", "": "", "none": "", "gzip": "GZIP"}
# Longest `max_seq_length`: sequences are padded to it a chunk of 1024 at a
# time (32 MiB of int32 at this length).
MAX_SEQ_LENGTH = 8192
DEFAULT_MAX_UNK_FRACTION = 0.05
# File descriptors kept free for TensorFlow and Python besides the shards.
_SPARE_FILE_DESCRIPTORS = 128


def _open_file_limit():
    """The soft limit on open files (`ulimit -n`), or `None` if unknown."""
    try:
        import resource  # pylint: disable=g-import-not-at-top

        limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        return None
    return limit if limit > 0 else None


@refuses_unknown_fields
@dataclasses.dataclass
class ShardConfig(
    beam_common.BeamSettings,
    corpus.TextInputSettings,
    masking.WholeWordMaskingSettings,
):
    """Configuration of `shards.build_shards`; `scripts/build_shards.py`'s
    flags are generated from it (help: field metadata; see `config_flags`).

    Example:
    >>> config = ShardConfig(vocab_file="vocab.txt", output_dir="shards",
    ...     num_shards=16)  # doctest: +SKIP
    >>> config.validate()  # doctest: +SKIP
    """

    input_patterns: Optional[object] = setting(
        None,
        help="Comma-separated text files or globs (.txt, .gz, .bz2), or a "
        "list; one sentence or paragraph per line, blank line between "
        "documents. Default: the embedded gensim Wikipedia sample.",
        flag="input",
        value_type=str,
    )
    vocab_file: str = setting(
        "", help="WordPiece vocabulary (one token per line).", required=True
    )
    output_dir: str = setting(
        "", help="Directory for the shards and manifest.json.", required=True
    )
    max_seq_length: int = setting(
        128,
        help="Longest sequence, [CLS] and [SEP] included.",
        valid=between(8, MAX_SEQ_LENGTH),
    )
    num_shards: int = setting(
        8,
        help="Number of TFRecord files; examples go round-robin.",
        valid=at_least(1),
    )
    seed: int = setting(
        12345,
        help="Seed of static masking (packing itself is deterministic).",
        valid=at_least(0),
    )
    static_masking: bool = setting(
        False,
        help="Write pre-masked examples in TF Model Garden's schema instead "
        "of input_word_ids for dynamic masking.",
    )
    dupe_factor: int = setting(
        1,
        help="With --static_masking: masked copies per sequence.",
        valid=at_least(1),
    )
    max_predictions_per_seq: int = setting(
        20,
        help="With --static_masking: masked positions.",
        valid=at_least(1),
    )
    mask_rate: float = setting(
        0.15,
        help="With --static_masking: masked fraction.",
        valid=between(0, 1, low_open=True, high_open=True),
    )
    lowercase: bool = setting(
        False, help="Lowercase and strip accents (match the vocabulary)."
    )
    compression: Optional[str] = setting(
        "none", help="TFRecord compression.", choices=("none", "gzip")
    )
    overwrite: bool = setting(
        False, help="Replace the shards of an existing --output_dir."
    )
    max_unk_fraction: float = setting(
        DEFAULT_MAX_UNK_FRACTION,
        help="Refuse the corpus, writing nothing, when more than this share "
        "of its tokens are [UNK] (a vocabulary or --lowercase that does not "
        "match the text, another language, binary input); 1 accepts any.",
        valid=between(0, 1),
    )
    line_batch_size: int = setting(
        1024, help="Lines per tokenizer call.", flag=False, valid=at_least(1)
    )
    num_parallel_calls: Optional[int] = setting(
        None, help="Tokenizer parallelism (None: one per core).", flag=False
    )
    file_prefix: str = setting(
        "pretrain", help="Shard file name prefix.", flag=False
    )

    def check_rules(self):
        self._check_paths()
        self._check_num_shards()
        self._check_static_masking()
        if self.runner and self.num_partitions > self.num_shards:
            self._refuse(
                "num_partitions",
                "must be <= num_shards with a runner (each partition writes "
                "its own shards)",
            )

    def _refuse(self, field, message):
        raise UserError(
            f"{flag_name(self, field)}: {message} (got "
            f"{getattr(self, field)!r})."
        )

    def _check_paths(self):
        if not self.vocab_file:
            self._refuse("vocab_file", "a vocabulary file is required")
        if not self.output_dir:
            self._refuse("output_dir", "an output directory is required")

    def _check_num_shards(self):
        """No more shards open at once than the process may open files."""
        open_at_once = self.num_shards
        if self.runner:
            open_at_once = -(-self.num_shards // self.num_partitions)
        limit = _open_file_limit()
        if limit is not None and open_at_once + _SPARE_FILE_DESCRIPTORS > limit:
            self._refuse(
                "num_shards",
                f"{open_at_once} shard files would be open at once, but this "
                f"process may open only {limit} files (ulimit -n); use "
                "fewer shards or raise the limit",
            )

    def _check_static_masking(self):
        refuse_ignored(
            self,
            ("max_predictions_per_seq", "mask_rate", "whole_word_masking"),
            self.static_masking,
            "with --static_masking (dynamic masking is set in the reader)",
        )
        self.refuse_unused_beam_settings()
        if self.dupe_factor > 1 and not self.static_masking:
            self._refuse(
                "dupe_factor",
                "only applies with --static_masking (dynamic masking "
                "draws new masks every epoch)",
            )
        if (
            self.static_masking
            and self.max_predictions_per_seq > self.max_seq_length
        ):
            self._refuse("max_predictions_per_seq", "must be <= max_seq_length")

    def _compression_key(self):
        if isinstance(self.compression, str):
            return self.compression.lower()
        return self.compression

    @property
    def tf_compression(self):
        """TFRecord's compression type: `""` or `"GZIP"`."""
        return _COMPRESSIONS[self._compression_key()]


def shard_names(config):
    """The file names of `config`'s shards, in shard order:
    `<file_prefix>-<i>-of-<num_shards>.tfrecord[.gz]`."""
    suffix = ".tfrecord" + (".gz" if config.tf_compression == "GZIP" else "")
    return [
        f"{config.file_prefix}-{i:05d}-of-{config.num_shards:05d}{suffix}"
        for i in range(config.num_shards)
    ]
