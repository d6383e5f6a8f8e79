"""Serializing packed sequences into the shards' `tf.train.Example`s.

Sequences are padded into chunks in Python and serialized (and, for the
static schema, masked) a chunk at a time by one `tf.function`, on worker
threads while the caller goes on packing. The dynamic schema is one
`input_word_ids` feature per sequence; the static schema is TF Model
Garden's (`manifest.STATIC_FEATURES`), `dupe_factor` masked copies of each
sequence.
"""

import collections
import concurrent.futures
import dataclasses
import functools

import numpy as np

from data_pipeline import example_encoding
from data_pipeline import masking


def padded_chunks(sequences, chunk_size, seq_length, pad_id):
    """Groups variable-length sequences into padded `[N, seq_length]` chunks.

    Yields:
      `(token_ids int32 [N, seq_length], lengths int32 [N])`, `N <= chunk_size`.
    """
    chunk = []
    for ids in sequences:
        chunk.append(ids)
        if len(chunk) == chunk_size:
            yield _pad(chunk, seq_length, pad_id)
            chunk = []
    if chunk:
        yield _pad(chunk, seq_length, pad_id)


def _pad(chunk, seq_length, pad_id):
    lengths = np.fromiter((len(ids) for ids in chunk), np.int32, len(chunk))
    token_ids = np.full([len(chunk), seq_length], pad_id, np.int32)
    # Row-major boolean assignment fills each row's leading slots in order.
    token_ids[np.arange(seq_length)[np.newaxis, :] < lengths[:, np.newaxis]] = (
        np.concatenate(chunk)
    )
    return token_ids, lengths


@dataclasses.dataclass(frozen=True)
class StaticMaskingSettings:
    """The `ShardConfig` fields that static masking depends on."""

    seed: int
    dupe_factor: int
    mask_rate: float
    max_predictions_per_seq: int
    whole_word_masking: bool


def make_chunk_serializer(config, vocabulary):
    """A `tf.function(token_ids, lengths, chunk_index) -> [N * D] records`.

    Dynamic schema: one `input_word_ids` example per sequence (unpadded).
    Static schema (TF Model Garden's, padded to `max_seq_length` and
    `max_predictions_per_seq`): `dupe_factor` masked copies of each sequence,
    one after the other, masked with `masking.mask_batch` under the stateless
    seed `[seed, chunk_index * dupe_factor + copy]`, so the output depends
    only on the inputs and the seed, never on thread timing.

    The same settings give the same function, traced once per process: a
    Beam worker builds many partitions, a test many shard sets.

    Example:
    >>> serialize = make_chunk_serializer(config, vocabulary)  # doctest: +SKIP
    >>> records = serialize(token_ids, lengths, np.int64(0)).numpy()  # doctest: +SKIP
    """
    if not config.static_masking:
        return _chunk_serializer(config.max_seq_length, None, None)
    settings = StaticMaskingSettings(
        seed=config.seed,
        dupe_factor=config.dupe_factor,
        mask_rate=config.mask_rate,
        max_predictions_per_seq=config.max_predictions_per_seq,
        whole_word_masking=config.whole_word_masking,
    )
    return _chunk_serializer(config.max_seq_length, settings, vocabulary)


@functools.lru_cache(maxsize=16)
def _chunk_serializer(seq_length, static_masking, vocabulary):
    """`make_chunk_serializer`'s function; `static_masking` is a
    `StaticMaskingSettings`, or None for the dynamic schema."""
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    signature = [
        tf.TensorSpec([None, seq_length], tf.int32),
        tf.TensorSpec([None], tf.int32),
        tf.TensorSpec([], tf.int64),
    ]
    if static_masking is None:
        return _dynamic_serializer(signature)
    return _static_serializer(signature, seq_length, static_masking, vocabulary)


def _dynamic_serializer(signature):
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    @tf.function(input_signature=signature, autograph=False)
    def serialize_dynamic(token_ids, lengths, chunk_index):
        del chunk_index  # No randomness.
        return example_encoding.serialize_examples(
            {"input_word_ids": ("int64", token_ids, lengths)}
        )

    return serialize_dynamic


def _leading_ones(width, dtype):
    """`[width + 1, width]`: row r has r ones, then zeros."""
    return np.tril(np.ones([width + 1, width], dtype), -1)


def _constant_entry_tables(seq_length, max_predictions):
    """The encoded entries of the features with few distinct values,
    encoded once (eagerly) and gathered per example: `input_mask` by
    length, `masked_lm_weights` by number of predictions, and the all-zero
    `segment_ids` and `next_sentence_labels`. Numpy bytes arrays."""
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    def entry_table(name, kind, rows):
        return example_encoding.feature_entries(
            name, kind, tf.constant(rows)
        ).numpy()

    return {
        "input_mask": entry_table(
            "input_mask", "int64", _leading_ones(seq_length, np.int64)
        ),
        "masked_lm_weights": entry_table(
            "masked_lm_weights",
            "float",
            _leading_ones(max_predictions, np.float32),
        ),
        "segment_ids": entry_table(
            "segment_ids", "int64", np.zeros([1, seq_length], np.int64)
        ),
        "next_sentence_labels": entry_table(
            "next_sentence_labels", "int64", np.zeros([1, 1], np.int64)
        ),
    }


def _static_serializer(signature, seq_length, static_masking, vocabulary):
    """The static schema's `tf.function`: `dupe_factor` masked copies of
    each sequence, a sequence's copies consecutive."""
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    masking_tables = {
        "is_special_table": masking.special_token_table(
            vocabulary.size, vocabulary.special_token_ids
        ),
        "replacement_id_array": masking.replacement_ids(
            vocabulary.size, vocabulary.special_token_ids
        ),
    }
    if static_masking.whole_word_masking:
        masking_tables["continuation_table"] = masking.continuation_table(
            vocabulary
        )
    dupe_factor = static_masking.dupe_factor
    max_predictions = static_masking.max_predictions_per_seq
    tables = _constant_entry_tables(seq_length, max_predictions)

    def masked_copy(token_ids, padding, constant_entries, seed):
        masked, positions, label_ids, weights = masking.mask_batch(
            token_ids,
            padding,
            seed,
            mask_rate=static_masking.mask_rate,
            max_predictions=max_predictions,
            mask_id=vocabulary.special_ids.mask,
            **masking_tables,
        )
        num_predictions = tf.reduce_sum(tf.cast(weights, tf.int32), axis=1)
        return example_encoding.examples_from_entries(
            dict(
                constant_entries,
                input_ids=example_encoding.feature_entries(
                    "input_ids", "int64", masked
                ),
                masked_lm_positions=example_encoding.feature_entries(
                    "masked_lm_positions", "int64", positions
                ),
                masked_lm_ids=example_encoding.feature_entries(
                    "masked_lm_ids", "int64", label_ids
                ),
                masked_lm_weights=tf.gather(
                    tables["masked_lm_weights"], num_predictions
                ),
            )
        )

    @tf.function(input_signature=signature, autograph=False)
    def serialize_static(token_ids, lengths, chunk_index):
        padding = tf.range(seq_length)[tf.newaxis, :] < lengths[:, tf.newaxis]
        batch = tf.shape(token_ids)[0]
        constant_entries = {
            "input_mask": tf.gather(tables["input_mask"], lengths),
            "segment_ids": tf.repeat(tables["segment_ids"], batch),
            "next_sentence_labels": tf.repeat(
                tables["next_sentence_labels"], batch
            ),
        }
        copies = []
        for copy in range(dupe_factor):
            seed = tf.stack(
                [
                    tf.constant(static_masking.seed, tf.int64),
                    chunk_index * dupe_factor + copy,
                ]
            )
            copies.append(
                masked_copy(token_ids, padding, constant_entries, seed)
            )
        # Row-major: a sequence's copies are consecutive records.
        return tf.reshape(tf.stack(copies, axis=1), [-1])

    return serialize_static


def serialized_examples(
    sequences, config, vocabulary, chunk_size=1024, max_chunks_in_flight=3
):
    """Yields the serialized `tf.train.Example`s of packed sequences, in order.

    Sequences are padded into chunks in Python and serialized (and, for the
    static schema, masked) a chunk at a time in TensorFlow. TensorFlow releases
    the GIL, so while worker threads serialize the last chunks the caller's
    thread goes on packing; at most `max_chunks_in_flight` chunks wait.

    Args:
      sequences: packed sequences, lists of token ids.
      config: a `ShardConfig`.
      vocabulary: a `vocab.Vocabulary`.
      chunk_size: sequences serialized at once.
      max_chunks_in_flight: chunks submitted and not yet written.

    Example:
    >>> for record in serialized_examples(sequences, config, vocab):  # doctest: +SKIP
    ...     writer.write(record)
    """
    serialize = make_chunk_serializer(config, vocabulary)

    def run(token_ids, lengths, chunk_index):
        return serialize(token_ids, lengths, chunk_index).numpy()

    chunks = padded_chunks(
        sequences, chunk_size, config.max_seq_length, vocabulary.special_ids.pad
    )
    pending = collections.deque()
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        try:
            for chunk_index, (token_ids, lengths) in enumerate(chunks):
                pending.append(
                    pool.submit(run, token_ids, lengths, chunk_index)
                )
                if len(pending) >= max_chunks_in_flight:
                    yield from pending.popleft().result()
            while pending:
                yield from pending.popleft().result()
        finally:
            for future in pending:
                future.cancel()
