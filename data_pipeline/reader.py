"""Reading pre-training shards into `tf.data` batches for keras-hub's MLM.

`pretraining_dataset` yields `(features, mask_ids, mask_weights)` with
`features = {"token_ids", "segment_ids", "padding_mask", "mask_positions"}`,
which is what `keras_hub.models.BertMaskedLM(backbone, preprocessor=None)`
takes in `fit()` (x, y, sample_weight).
"""

import dataclasses
import os
import random
from typing import List
from typing import Tuple

from absl import logging

from data_pipeline import manifest as manifest_lib
from data_pipeline import masking
from data_pipeline import vocab as vocab_lib
from tupe_tf.utils import fileio


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
        raise ValueError("file_patterns: no shard file or directory given.")
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
                    raise FileNotFoundError(f"Shard file not found: {path}")
                raise ValueError(
                    f"Shard {path} is not listed in {manifest['_path']}: a leftover "
                    "or foreign file, not part of this shard set."
                )
            if name not in selected:
                selected.append(name)
    if not by_directory:
        raise ValueError(f"file_patterns {file_patterns!r} name no shard.")
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
      FileNotFoundError / ValueError: no manifest, a file not in its manifest,
        a pattern that matches nothing.

    Example:
    >>> check = verify_shards("shards/", verify="full")  # doctest: +SKIP
    >>> check.bad_shards  # doctest: +SKIP
    []
    """
    if verify not in ("size", "sha256", "full"):
        raise ValueError(
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


def _check_vocabulary(manifests, vocabulary):
    for manifest in manifests:
        if manifest["vocab"]["sha256"] != vocabulary.sha256:
            raise ValueError(
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
      ValueError: naming both files if the vocabulary's sha256 differs from the
        manifest's, or if the vocabulary lacks a special token.
      FileNotFoundError: missing vocabulary, manifest or shard pattern.

    Example:
    >>> check_shards_vocabulary("shards/", "vocab.txt")  # doctest: +SKIP
    """
    vocabulary = vocab_lib.load_vocabulary(vocab_file)
    check = verify_shards(file_patterns, verify="size")
    _check_vocabulary(check.manifests, vocabulary)
    return check


def _agreed(manifests, field):
    values = {str(m[field]) for m in manifests}
    if len(values) > 1:
        raise ValueError(
            f"Shard directories disagree on {field}: "
            + ", ".join(f"{m['_path']}: {m[field]!r}" for m in manifests)
        )
    return manifests[0][field]


def pretraining_dataset(
    file_patterns,
    vocab_file,
    seq_length,
    batch_size,
    max_predictions_per_seq=None,
    mask_rate=0.15,
    is_training=True,
    shuffle_buffer=10000,
    seed=None,
    deterministic=False,
    input_context=None,
    skip_bad_shards=False,
    drop_remainder=True,
    skip_batches=0,
    verify="size",
    cycle_length=16,
):
    """A `tf.data` pipeline of masked-LM batches from pre-training shards.

    Reads dynamic shards (`input_word_ids`; masks are drawn on the fly, new
    ones every epoch) and static shards (TF Model Garden's `input_ids`,
    `masked_lm_*` features; their stored masks are used).

    Dynamic masking: `min(P, max(1, round(mask_rate * n)))` of the `n`
    non-special real tokens of each sequence; 80% become `[MASK]`, 10% a random
    non-special token, 10% stay. `[CLS]`, `[SEP]`, `[PAD]` (any bracketed
    special token of the vocabulary) are never chosen nor used as random
    replacements. Masks are stateless functions of `(seed, batch index)`, so
    they do not depend on thread scheduling.

    Args:
      file_patterns: comma-separated string or list of shard globs, or shard
        directories holding `manifest.json`.
      vocab_file: the model's vocabulary; its sha256 must match the manifest.
      seq_length: output sequence length; shorter shards are padded; shards
        with a larger `max_seq_length` are refused.
      batch_size: per-replica batch size.
      max_predictions_per_seq: prediction slots `P`; default
        `round(mask_rate * seq_length)` (static shards: their stored value).
      mask_rate: fraction of tokens masked (dynamic shards).
      is_training: shuffle and repeat forever; else one pass in file order.
      shuffle_buffer: examples in the shuffle buffer.
      seed: seed of file order, shuffling and masks (`None`: random, or 0 when
        `deterministic`).
      deterministic: fixed order and masks given `seed` (tests, resumption).
      input_context: `tf.distribute.InputContext`; files (or, with fewer files
        than input pipelines, examples) are split between pipelines.
      skip_bad_shards: drop shards that fail verification (logged with a
        count) and, at read time, the rest of a shard whose records turn out
        corrupted; otherwise such shards raise an error naming them.
      drop_remainder: drop the last partial batch (static shapes, for TPUs).
      skip_batches: skip this many batches before parsing and masking (cheap
        resumption: with `deterministic=True` and the same seed, the result
        equals `pretraining_dataset(...).skip(skip_batches)`).
      verify: shard verification before reading, see `verify_shards`.
      cycle_length: shards read concurrently.

    Returns:
      A `tf.data.Dataset` of `(features, mask_ids, mask_weights)`:
      `features["token_ids"|"segment_ids"|"padding_mask"]` int32 `[B, S]`
      (`padding_mask` 1 for real tokens), `features["mask_positions"]` and
      `mask_ids` int32 `[B, P]`, `mask_weights` float32 `[B, P]`.

    Raises:
      ValueError: vocabulary mismatch (naming both files), `seq_length` too
        short for the shards, bad shards (naming them) unless
        `skip_bad_shards`, inconsistent shard directories.
      FileNotFoundError: missing vocabulary, manifest or shards.

    Example:
    >>> ds = pretraining_dataset("shards/", "vocab.txt", seq_length=128,
    ...                          batch_size=32)  # doctest: +SKIP
    >>> masked_lm = keras_hub.models.BertMaskedLM(backbone, preprocessor=None)  # doctest: +SKIP
    >>> masked_lm.fit(ds, steps_per_epoch=1000)  # doctest: +SKIP
    """
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    vocabulary = vocab_lib.load_vocabulary(vocab_file)
    check = verify_shards(file_patterns, verify=verify)
    _check_vocabulary(check.manifests, vocabulary)
    schema = _agreed(check.manifests, "schema")
    compression = _agreed(check.manifests, "compression")
    shard_seq_length = max(int(m["max_seq_length"]) for m in check.manifests)
    if not isinstance(seq_length, int) or seq_length < 2:
        raise ValueError(f"seq_length must be an int >= 2, got {seq_length!r}.")
    if shard_seq_length > seq_length:
        raise ValueError(
            f"seq_length={seq_length} is shorter than the shards' max_seq_length="
            f"{shard_seq_length} ({check.manifest['_path']}); rebuild the shards "
            "or raise seq_length."
        )
    if check.bad_shards:
        listing = "; ".join(f"{p}: {r}" for p, r in check.bad_shards)
        if not skip_bad_shards:
            raise ValueError(
                f"{len(check.bad_shards)} bad shard(s): {listing}. Rebuild them, or "
                "pass skip_bad_shards=True to train without them."
            )
        logging.warning(
            "Skipping %d bad shard(s) of %d: %s",
            len(check.bad_shards),
            len(check.bad_shards) + len(check.files),
            listing,
        )
    if not check.files:
        raise ValueError(f"No readable shard in {file_patterns!r}.")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}.")

    if schema == manifest_lib.SCHEMA_STATIC:
        stored_predictions = int(
            _agreed(check.manifests, "static_masking")[
                "max_predictions_per_seq"
            ]
        )
        if max_predictions_per_seq is None:
            max_predictions_per_seq = stored_predictions
        elif max_predictions_per_seq < stored_predictions:
            raise ValueError(
                f"max_predictions_per_seq={max_predictions_per_seq} is smaller than "
                f"the static shards' {stored_predictions}."
            )
    elif max_predictions_per_seq is None:
        max_predictions_per_seq = max(1, int(round(mask_rate * seq_length)))
    if not 1 <= max_predictions_per_seq <= seq_length:
        raise ValueError(
            f"max_predictions_per_seq must be in [1, seq_length], got "
            f"{max_predictions_per_seq}."
        )

    if seed is None:
        seed = 0 if deterministic else random.SystemRandom().randrange(2**31)
    ordered = deterministic or not is_training

    files = tf.data.Dataset.from_tensor_slices(
        (
            tf.constant(check.files),
            tf.constant(check.expected_examples, tf.int64),
        )
    )
    shard_examples = False
    if input_context is not None and input_context.num_input_pipelines > 1:
        if len(check.files) >= input_context.num_input_pipelines:
            files = files.shard(
                input_context.num_input_pipelines,
                input_context.input_pipeline_id,
            )
        else:
            shard_examples = True
    if is_training:
        files = files.shuffle(
            len(check.files), seed=seed + 1, reshuffle_each_iteration=True
        ).repeat()

    @tf.autograph.experimental.do_not_convert
    def read_shard(path, expected):
        records = tf.data.TFRecordDataset(
            path, compression_type=compression, buffer_size=1 << 20
        )
        if skip_bad_shards:
            return records.ignore_errors(log_warning=True)
        return _with_count_check(tf, records, path, expected)

    dataset = files.interleave(
        read_shard,
        cycle_length=max(1, min(cycle_length, len(check.files))),
        block_length=1,
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=ordered,
    )
    if shard_examples:
        dataset = dataset.shard(
            input_context.num_input_pipelines, input_context.input_pipeline_id
        )
    if is_training and shuffle_buffer > 1:
        dataset = dataset.shuffle(
            shuffle_buffer, seed=seed + 2, reshuffle_each_iteration=True
        )
    dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
    dataset = dataset.enumerate()
    if skip_batches:
        dataset = dataset.skip(skip_batches)

    special = vocabulary.special_ids
    static_batch = batch_size if drop_remainder else None
    if schema == manifest_lib.SCHEMA_STATIC:
        process = _static_batch_fn(
            tf,
            seq_length,
            shard_seq_length,
            max_predictions_per_seq,
            stored_predictions,
            special.pad,
            static_batch,
        )
    else:
        is_special_table = masking.special_token_table(
            vocabulary.size, vocabulary.special_token_ids
        )
        process = _dynamic_batch_fn(
            tf,
            seq_length,
            max_predictions_per_seq,
            mask_rate,
            special,
            is_special_table,
            masking.replacement_ids(
                vocabulary.size, vocabulary.special_token_ids
            ),
            seed,
            static_batch,
        )
    dataset = dataset.map(
        process, num_parallel_calls=tf.data.AUTOTUNE, deterministic=ordered
    )
    dataset = dataset.prefetch(tf.data.AUTOTUNE)
    options = tf.data.Options()
    options.deterministic = ordered
    return dataset.with_options(options)


def _with_count_check(tf, records, path, expected):
    """Reads a shard; a short or corrupted one raises an error naming it."""
    # Errors inside TFRecordDataset do not name the file. So read with
    # ignore_errors and append a sentinel that checks the record count against
    # the manifest: a corrupted or truncated shard then fails with its name.
    marked = (
        records.ignore_errors()
        .map(lambda r: (r, False))
        .concatenate(tf.data.Dataset.from_tensors((tf.constant(b""), True)))
    )

    def count(total, element):
        record, is_end = element
        return total + tf.cast(tf.logical_not(is_end), tf.int64), (
            total,
            record,
            is_end,
        )

    def check(total, record, is_end):
        ok = tf.logical_or(tf.logical_not(is_end), tf.equal(total, expected))
        assertion = tf.debugging.Assert(
            ok,
            [
                tf.strings.join(
                    [
                        "Shard ",
                        path,
                        " is truncated or corrupted: read ",
                        tf.strings.as_string(total),
                        " valid records, its manifest lists ",
                        tf.strings.as_string(expected),
                        ". Rebuild it or pass skip_bad_shards=True.",
                    ]
                )
            ],
        )
        with tf.control_dependencies([assertion]):
            return tf.identity(record), is_end

    return (
        marked.scan(tf.constant(0, tf.int64), count)
        .map(check)
        .filter(lambda record, is_end: tf.logical_not(is_end))
        .map(lambda record, is_end: record)
    )


def _dynamic_batch_fn(
    tf,
    seq_length,
    max_predictions,
    mask_rate,
    special,
    is_special_table,
    replacement_id_array,
    seed,
    static_batch,
):
    features_spec = {"input_word_ids": tf.io.RaggedFeature(tf.int64)}

    @tf.autograph.experimental.do_not_convert
    def process(batch_index, serialized):
        parsed = tf.io.parse_example(serialized, features_spec)
        ids = tf.cast(parsed["input_word_ids"], tf.int32)
        token_ids = ids.to_tensor(
            default_value=special.pad, shape=[static_batch, seq_length]
        )
        padding_mask = tf.sequence_mask(
            tf.minimum(ids.row_lengths(), seq_length), seq_length, tf.int32
        )
        masked, positions, mask_ids, weights = masking.mask_batch(
            token_ids,
            padding_mask,
            tf.stack([tf.constant(seed, tf.int64), batch_index]),
            mask_rate=mask_rate,
            max_predictions=max_predictions,
            mask_id=special.mask,
            is_special_table=is_special_table,
            replacement_id_array=replacement_id_array,
        )
        features = {
            "token_ids": masked,
            "segment_ids": tf.zeros_like(masked),
            "padding_mask": padding_mask,
            "mask_positions": positions,
        }
        return features, mask_ids, weights

    return process


def _static_batch_fn(
    tf,
    seq_length,
    shard_seq_length,
    max_predictions,
    stored_predictions,
    pad_id,
    static_batch,
):
    del static_batch  # FixedLenFeature shapes are static already.
    s, p = shard_seq_length, stored_predictions
    # TF Model Garden's feature names and shapes.
    features_spec = {
        "input_ids": tf.io.FixedLenFeature([s], tf.int64),
        "input_mask": tf.io.FixedLenFeature([s], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([s], tf.int64),
        "masked_lm_positions": tf.io.FixedLenFeature([p], tf.int64),
        "masked_lm_ids": tf.io.FixedLenFeature([p], tf.int64),
        "masked_lm_weights": tf.io.FixedLenFeature([p], tf.float32),
    }

    def pad(x, length, value=0):
        x = tf.cast(x, tf.int32) if x.dtype == tf.int64 else x
        extra = length - x.shape[1]
        return (
            tf.pad(x, [[0, 0], [0, extra]], constant_values=value)
            if extra
            else x
        )

    @tf.autograph.experimental.do_not_convert
    def process(batch_index, serialized):
        del batch_index
        parsed = tf.io.parse_example(serialized, features_spec)
        features = {
            "token_ids": pad(parsed["input_ids"], seq_length, pad_id),
            "segment_ids": pad(parsed["segment_ids"], seq_length),
            "padding_mask": pad(parsed["input_mask"], seq_length),
            "mask_positions": pad(
                parsed["masked_lm_positions"], max_predictions
            ),
        }
        return (
            features,
            pad(parsed["masked_lm_ids"], max_predictions),
            pad(parsed["masked_lm_weights"], max_predictions),
        )

    return process
