"""Checking pre-training shards against their manifests before they are
read: which files a pattern names, whether each is complete, and whether
they were built with the model's vocabulary; `check_training_shards` is the
one check a training run makes (every refusal a `UserError` naming the flag
the shards were given with).
"""

import dataclasses
import os
from typing import List
from typing import Tuple

from data_pipeline import manifest as manifest_lib
from data_pipeline import vocab as vocab_lib
from tupe_tf.utils import fileio
from tupe_tf.utils.errors import UserError


@dataclasses.dataclass
class ShardCheck:
    """Result of `verify_shards`.

    Attributes:
      manifests: the manifests involved, one per shard directory.
      files: good shard paths, in a fixed order.
      expected_examples: example count of each good shard (from its manifest).
      bad_shards: `(path, reason)` of each shard that failed the check.
    """

    manifests: List[dict]
    files: List[str]
    expected_examples: List[int]
    bad_shards: List[Tuple[str, str]]

    @property
    def manifest(self):
        return self.manifests[0]


def _split_patterns(file_patterns):
    patterns = fileio.split_patterns(file_patterns)
    if not patterns:
        raise UserError("file_patterns: no shard file or directory given.")
    return patterns


def _resolve_shards(file_patterns):
    """Returns `[(manifest, [shard entries])]` for the given patterns."""
    by_directory = {}  # directory -> (manifest, {name: entry}, selected names)

    def directory_entry(directory):
        directory = os.path.abspath(directory)
        if directory not in by_directory:
            manifest = manifest_lib.read_manifest(directory)
            entries = {s["name"]: s for s in manifest["shards"]}
            by_directory[directory] = (manifest, entries, [])
        return by_directory[directory]

    for pattern in _split_patterns(file_patterns):
        if os.path.isdir(pattern):
            manifest, entries, selected = directory_entry(pattern)
            selected.extend(n for n in entries if n not in selected)
            continue
        # A plain path is checked against its manifest below.
        matches = fileio.expand_pattern(pattern, "Shard", exists_fn=None)
        for path in matches:
            name = os.path.basename(path)
            # A glob such as DIR/* also matches the manifest and temporary files.
            if name == manifest_lib.MANIFEST_NAME or name.startswith("."):
                continue
            manifest, entries, selected = directory_entry(
                os.path.dirname(path) or "."
            )
            if name not in entries:
                if not os.path.exists(path):
                    raise fileio.NoMatchingFileError(
                        f"Shard file not found: {path}"
                    )
                raise UserError(
                    f"Shard {path} is not listed in {manifest['_path']}: a leftover "
                    "or foreign file, not part of this shard set."
                )
            if name not in selected:
                selected.append(name)
    if not by_directory:
        raise UserError(f"file_patterns {file_patterns!r} name no shard.")
    return [
        (manifest, [entries[n] for n in selected])
        for manifest, entries, selected in by_directory.values()
    ]


def verify_shards(file_patterns, verify="size"):
    """Checks shard files against their manifests.

    Args:
      file_patterns: comma-separated string or list of shard globs and/or
        shard directories (each shard's directory must hold `manifest.json`).
      verify: `"size"` (file exists with the manifest's byte count: catches
        missing and truncated shards, costs one `stat` each), `"sha256"`
        (also hashes every byte) or `"full"` (also reads every record with
        TFRecord CRC checks and counts them).

    Returns:
      A `ShardCheck`; problems are listed in `bad_shards`, not raised.

    Raises:
      UserError: a bad `verify`, a file not in its manifest, a damaged
        manifest; `fileio.NoMatchingFileError` (also a `FileNotFoundError`):
        no manifest, a pattern that matches nothing.

    Example:
    >>> check = verify_shards("shards/", verify="full")  # doctest: +SKIP
    >>> check.bad_shards  # doctest: +SKIP
    []
    """
    if verify not in ("size", "sha256", "full"):
        raise UserError(
            f"verify must be 'size', 'sha256' or 'full', got {verify!r}."
        )
    manifests, files, expected, bad = [], [], [], []
    for manifest, entries in _resolve_shards(file_patterns):
        manifests.append(manifest)
        directory = os.path.dirname(manifest["_path"])
        for entry in entries:
            path = os.path.join(directory, entry["name"])
            reason = None
            if not os.path.isfile(path):
                reason = "missing"
            elif os.path.getsize(path) != entry["bytes"]:
                reason = (
                    f"size {os.path.getsize(path)} bytes, manifest says "
                    f"{entry['bytes']} (truncated or modified)"
                )
            elif (
                verify == "sha256"
                and fileio.file_sha256(path) != entry["sha256"]
            ):
                reason = "sha256 differs from the manifest (corrupted)"
            elif verify == "full":
                reason = _read_whole_shard(
                    path, manifest["compression"], entry["examples"]
                )
            if reason:
                bad.append((path, reason))
            else:
                files.append(path)
                expected.append(int(entry["examples"]))
    return ShardCheck(manifests, files, expected, bad)


def _read_whole_shard(path, compression, expected_examples):
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    count = 0
    try:
        for _ in tf.data.TFRecordDataset(path, compression_type=compression):
            count += 1
    except (
        tf.errors.DataLossError,
        tf.errors.InvalidArgumentError,
        tf.errors.OutOfRangeError,
    ) as e:
        return f"unreadable after {count} records ({e.message.strip()})"
    if count != expected_examples:
        return f"{count} records, manifest says {expected_examples}"
    return None


def check_vocabulary(manifests, vocabulary):
    """Refuses manifests of another vocabulary than `vocabulary`."""
    for manifest in manifests:
        if manifest["vocab"]["sha256"] != vocabulary.sha256:
            raise UserError(
                f"Vocabulary mismatch: {vocabulary.path} (sha256 "
                f"{vocabulary.sha256[:12]}..., {vocabulary.size} tokens) is not the "
                f"vocabulary the shards of {manifest['_path']} were built with "
                f"({manifest['vocab']['file']}, sha256 "
                f"{manifest['vocab']['sha256'][:12]}..., {manifest['vocab']['size']}"
                " tokens)."
            )


def check_shards_vocabulary(file_patterns, vocab_file):
    """Pre-flight check that shards were built with `vocab_file`.

    Args:
      file_patterns: shard globs and/or directories (see `verify_shards`).
      vocab_file: the vocabulary the model will use.

    Returns:
      The `ShardCheck` of a size check of the shards.

    Raises:
      UserError: naming both files if the vocabulary's sha256 differs from
        the manifest's, or if the vocabulary lacks a special token;
        `fileio.NoMatchingFileError` (also a `FileNotFoundError`): a missing
        vocabulary, manifest or shard pattern.

    Example:
    >>> check_shards_vocabulary("shards/", "vocab.txt")  # doctest: +SKIP
    """
    vocabulary = vocab_lib.load_vocabulary(vocab_file)
    check = verify_shards(file_patterns, verify="size")
    check_vocabulary(check.manifests, vocabulary)
    return check


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
    files, flag, vocabulary, seq_length, skip_bad_shards=False
):
    """Refuses shards a training run could not read to the end.

    Args:
        files: the shard paths (globs expanded).
        flag: how messages name them, e.g. `"--train_files"`.
        vocabulary: the `vocab.Vocabulary` the model uses, loaded; the
            shards' manifests must name it (same sha256).
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
        check_vocabulary(check.manifests, vocabulary)
    except UserError as error:
        raise UserError(
            f"{flag} were not built with --vocab_file={vocabulary.path}: "
            f"{error}"
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
