"""Reading pre-training shards into `tf.data` batches for keras-hub's MLM.

`pretraining_dataset` yields `(features, mask_ids, mask_weights)` with
`features = {"token_ids", "segment_ids", "padding_mask", "mask_positions"}`,
which is what `keras_hub.models.BertMaskedLM(backbone, preprocessor=None)`
takes in `fit()` (x, y, sample_weight).
"""

import random

from absl import logging

from data_pipeline import manifest as manifest_lib
from data_pipeline import masking
from data_pipeline import shard_verification
from data_pipeline import vocab as vocab_lib
from tupe_tf.utils.errors import UserError

# The override a bad shard's message names, as a keyword argument of
# `pretraining_dataset`; the scripts name their flag instead.
SKIP_OVERRIDE = "skip_bad_shards=True"
_BAD_SHARD_END = f"Rebuild it or pass {SKIP_OVERRIDE}."
# How `tf.debugging.Assert` opens the message of a failed assertion.
_ASSERTION = "assertion failed: ["


class BadShardError(UserError):
    """A shard that turned out truncated or corrupted while it was read.

    `tf.data` can stop a pipeline only with a `tf.errors.OpError`, whose
    one payload is its text: the reader's check fails as an
    `InvalidArgumentError` holding this error's sentence, and
    `from_op_error` gives it back as this type.

    Example:
    >>> try:  # doctest: +SKIP
    ...     model.fit(pretraining_dataset(...))
    ... except tf.errors.OpError as error:
    ...     bad = BadShardError.from_op_error(error)
    """

    @classmethod
    def from_op_error(cls, error):
        """The `BadShardError` `error` carries, or `None` when `error`
        (a `tf.errors.OpError`) is not the reader's bad-shard check."""
        text = getattr(error, "message", None) or ""
        end = text.find(_BAD_SHARD_END)
        start = text.rfind(_ASSERTION, 0, end)
        if end < 0 or start < 0:
            return None
        return cls(text[start + len(_ASSERTION) : end + len(_BAD_SHARD_END)])


def _agreed(manifests, field):
    values = {str(m[field]) for m in manifests}
    if len(values) > 1:
        raise UserError(
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
    whole_word_masking=False,
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
      vocab_file: the model's vocabulary, its path or a loaded `Vocabulary`
        (`vocab.load_vocabulary`); its sha256 must match the manifest.
      seq_length: output sequence length; shorter shards are padded; shards
        with a larger `max_seq_length` are refused.
      batch_size: per-replica batch size.
      max_predictions_per_seq: prediction slots `P`; default
        `round(mask_rate * seq_length)` (static shards: their stored value).
      mask_rate: fraction of tokens masked (dynamic shards).
      whole_word_masking: mask every piece of a chosen word together
        (dynamic shards; see `masking`); the vocabulary needs `##` pieces.
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
      verify: shard verification before reading, see
        `shard_verification.verify_shards`.
      cycle_length: shards read concurrently.

    Returns:
      A `tf.data.Dataset` of `(features, mask_ids, mask_weights)`:
      `features["token_ids"|"segment_ids"|"padding_mask"]` int32 `[B, S]`
      (`padding_mask` 1 for real tokens), `features["mask_positions"]` and
      `mask_ids` int32 `[B, P]`, `mask_weights` float32 `[B, P]`.

    Raises:
      UserError: vocabulary mismatch (naming both files), a vocabulary
        without `##` pieces with `whole_word_masking`, `seq_length` too
        short for the shards, bad shards (naming them) unless
        `skip_bad_shards`, inconsistent shard directories, a bad argument;
        `fileio.NoMatchingFileError` (also a `FileNotFoundError`): a missing
        vocabulary, manifest or shard. A `batch_size` below 1 is refused by
        `tf.data`. A shard found damaged while it is read stops the
        iteration with the `tf.errors.InvalidArgumentError` of
        `BadShardError.from_op_error`.

    Example:
    >>> ds = pretraining_dataset("shards/", "vocab.txt", seq_length=128,
    ...                          batch_size=32)  # doctest: +SKIP
    >>> masked_lm = keras_hub.models.BertMaskedLM(backbone, preprocessor=None)  # doctest: +SKIP
    >>> masked_lm.fit(ds, steps_per_epoch=1000)  # doctest: +SKIP
    """
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    vocabulary, check = _checked_shards(
        file_patterns, vocab_file, verify, seq_length, skip_bad_shards
    )
    continuation_table = None
    if whole_word_masking:
        continuation_table = masking.continuation_table(vocabulary)
    schema = _agreed(check.manifests, "schema")
    max_predictions_per_seq, stored_predictions = _prediction_slots(
        check, schema, max_predictions_per_seq, mask_rate, seq_length
    )
    if seed is None:
        seed = 0 if deterministic else random.SystemRandom().randrange(2**31)
    ordered = deterministic or not is_training
    dataset = _records(
        tf,
        check,
        is_training=is_training,
        seed=seed,
        ordered=ordered,
        input_context=input_context,
        skip_bad_shards=skip_bad_shards,
        cycle_length=cycle_length,
        shuffle_buffer=shuffle_buffer,
    )
    dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
    dataset = dataset.enumerate()
    if skip_batches:
        dataset = dataset.skip(skip_batches)
    static_batch = batch_size if drop_remainder else None
    if schema == manifest_lib.SCHEMA_STATIC:
        process = _static_batch_fn(
            tf,
            seq_length,
            max(int(m["max_seq_length"]) for m in check.manifests),
            max_predictions_per_seq,
            stored_predictions,
            vocabulary.special_ids.pad,
            static_batch,
        )
    else:
        process = _dynamic_batch_fn(
            tf,
            seq_length,
            max_predictions_per_seq,
            mask_rate,
            vocabulary,
            seed,
            static_batch,
            continuation_table,
        )
    dataset = dataset.map(
        process, num_parallel_calls=tf.data.AUTOTUNE, deterministic=ordered
    )
    dataset = dataset.prefetch(tf.data.AUTOTUNE)
    options = tf.data.Options()
    options.deterministic = ordered
    return dataset.with_options(options)


def _checked_shards(
    file_patterns, vocab_file, verify, seq_length, skip_bad_shards
):
    """`(vocabulary, ShardCheck)` of shards that may be read at
    `seq_length` with `vocab_file`; bad shards are refused, or logged and
    left out with `skip_bad_shards`."""
    vocabulary = vocab_lib.as_vocabulary(vocab_file)
    check = shard_verification.verify_shards(file_patterns, verify=verify)
    shard_verification.check_vocabulary(check.manifests, vocabulary)
    _agreed(check.manifests, "schema")
    _agreed(check.manifests, "compression")
    shard_seq_length = max(int(m["max_seq_length"]) for m in check.manifests)
    if not isinstance(seq_length, int) or seq_length < 2:
        raise UserError(f"seq_length must be an int >= 2, got {seq_length!r}.")
    if shard_seq_length > seq_length:
        raise UserError(
            f"seq_length={seq_length} is shorter than the shards' max_seq_length="
            f"{shard_seq_length} ({check.manifest['_path']}); rebuild the shards "
            "or raise seq_length."
        )
    if check.bad_shards:
        listing = "; ".join(f"{p}: {r}" for p, r in check.bad_shards)
        if not skip_bad_shards:
            raise UserError(
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
        raise UserError(f"No readable shard in {file_patterns!r}.")
    return vocabulary, check


def _prediction_slots(
    check, schema, max_predictions_per_seq, mask_rate, seq_length
):
    """`(P, stored)`: the prediction slots of the batches, and those the
    static shards hold (`None` for dynamic shards)."""
    stored_predictions = None
    if schema == manifest_lib.SCHEMA_STATIC:
        stored_predictions = int(
            _agreed(check.manifests, "static_masking")[
                "max_predictions_per_seq"
            ]
        )
        if max_predictions_per_seq is None:
            max_predictions_per_seq = stored_predictions
        elif max_predictions_per_seq < stored_predictions:
            raise UserError(
                f"max_predictions_per_seq={max_predictions_per_seq} is smaller than "
                f"the static shards' {stored_predictions}."
            )
    elif max_predictions_per_seq is None:
        max_predictions_per_seq = max(1, int(round(mask_rate * seq_length)))
    if not 1 <= max_predictions_per_seq <= seq_length:
        raise UserError(
            f"max_predictions_per_seq must be in [1, seq_length], got "
            f"{max_predictions_per_seq}."
        )
    return max_predictions_per_seq, stored_predictions


def _records(
    tf,
    check,
    is_training,
    seed,
    ordered,
    input_context,
    skip_bad_shards,
    cycle_length,
    shuffle_buffer,
):
    """The serialized examples of the checked shards: this input
    pipeline's share, interleaved, and with `is_training` shuffled and
    repeated."""
    compression = _agreed(check.manifests, "compression")
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
    return dataset


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
                        ". " + _BAD_SHARD_END,
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
    vocabulary,
    seed,
    static_batch,
    continuation_table,
):
    """Parses a batch of dynamic-schema records and masks it under the
    stateless seed `[seed, batch index]` (whole words with a
    `continuation_table`)."""
    special = vocabulary.special_ids
    is_special_table = masking.special_token_table(
        vocabulary.size, vocabulary.special_token_ids
    )
    replacement_id_array = masking.replacement_ids(
        vocabulary.size, vocabulary.special_token_ids
    )
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
            continuation_table=continuation_table,
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
