"""BERT masked-LM masking, vectorized over a batch in TensorFlow with stateless
random numbers: the reader's dynamic masking and the shard builder's static
masking (`--static_masking`) are the same function.

The rule: candidates are the real tokens that are not special
(`[CLS]`, `[SEP]`, `[PAD]`, ... never get masked). Each sequence masks
`min(max_predictions, max(1, round(mask_rate * num_candidates)))` candidates
chosen uniformly without replacement (none if there are no candidates). Of
the chosen positions, 80% become `[MASK]`, 10% a random non-special token and
10% stay unchanged. Positions are sorted; unused prediction slots have
position 0, id 0 and weight 0.
"""

import numpy as np

from tupe_tf.utils.errors import UserError

MASK_TOKEN_RATE = 0.8
RANDOM_TOKEN_RATE = 0.1


def num_to_mask(num_candidates, mask_rate, max_predictions):
    """How many positions a sequence with `num_candidates` candidates masks."""
    if num_candidates <= 0:
        return 0
    # floor(x + 0.5): round half up, the same in numpy and TensorFlow.
    wanted = int(np.floor(mask_rate * num_candidates + 0.5))
    return min(max_predictions, max(1, wanted))


def special_token_table(vocab_size, special_token_ids):
    """bool `[vocab_size]`, true for the ids that are never masked."""
    table = np.zeros([vocab_size], bool)
    table[list(special_token_ids)] = True
    return table


def replacement_ids(vocab_size, special_token_ids):
    """Ids a masked token may be randomly replaced with: all non-special."""
    special = special_token_table(vocab_size, special_token_ids)
    ids = np.flatnonzero(~special).astype(np.int32)
    if not len(ids):
        raise UserError("The vocabulary has no non-special token.")
    return ids


def mask_batch(
    token_ids,
    padding_mask,
    seed,
    *,
    mask_rate,
    max_predictions,
    mask_id,
    is_special_table,
    replacement_id_array,
):
    """Dynamically masks a dense batch (TensorFlow, stateless randomness).

    The same `seed` always gives the same masks, whatever the thread or order
    the batch is processed in; pass e.g. `[run_seed, batch_index]`.

    Args:
      token_ids: int32 `[B, S]`.
      padding_mask: bool or int `[B, S]`, true for real tokens.
      seed: int32/int64 shape `[2]`, a stateless seed.
      mask_rate: fraction of candidates to mask.
      max_predictions: `P`, the number of prediction slots (`P <= S`).
      mask_id: id of `[MASK]`.
      is_special_table: bool `[vocab_size]`, true for never-masked ids.
      replacement_id_array: int32 ids used for random replacements.

    Returns:
      `(masked_token_ids [B,S], mask_positions [B,P], mask_ids [B,P],
      mask_weights float32 [B,P])`.

    Example:
    >>> import tensorflow as tf  # doctest: +SKIP
    >>> mask_batch(ids, ids > 0, [1, 0], mask_rate=0.15, max_predictions=20,
    ...            mask_id=4, is_special_table=table,
    ...            replacement_id_array=ids_ok)  # doctest: +SKIP
    """
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    token_ids = tf.convert_to_tensor(token_ids, tf.int32)
    seq_length = token_ids.shape[1]
    if seq_length is not None and max_predictions > seq_length:
        raise ValueError(
            f"max_predictions_per_seq ({max_predictions}) must be <= the "
            f"sequence length ({seq_length})."
        )
    seeds = tf.random.experimental.stateless_split(
        tf.cast(seed, tf.int64), num=3
    )
    shape = tf.shape(token_ids)
    positions, chosen = _chosen_positions(
        tf,
        token_ids,
        padding_mask,
        seeds[0],
        mask_rate,
        max_predictions,
        is_special_table,
    )
    originals = tf.gather(token_ids, positions, batch_dims=1)
    new_values = _new_values(
        tf, originals, seeds[1], seeds[2], mask_id, replacement_id_array
    )

    # Scatter-add of the changes: unused slots add 0 (at position 0), so
    # duplicate indices never conflict.
    chosen_int = tf.cast(chosen, tf.int32)
    batch_index = tf.broadcast_to(
        tf.range(shape[0])[:, tf.newaxis], tf.shape(positions)
    )
    indices = tf.stack([batch_index, positions], axis=-1)
    delta = tf.scatter_nd(indices, (new_values - originals) * chosen_int, shape)
    masked = token_ids + delta
    mask_ids = originals * chosen_int
    return masked, positions, mask_ids, tf.cast(chosen, tf.float32)


def _chosen_positions(
    tf,
    token_ids,
    padding_mask,
    seed,
    mask_rate,
    max_predictions,
    is_special_table,
):
    """`(positions [B, P], chosen [B, P])`: a uniform random subset of each
    row's candidates (real, non-special tokens), `mask_rate` of them
    rounded, at least 1 and at most `P`, in increasing position order;
    unused slots hold position 0 and `chosen` False."""
    is_special = tf.gather(tf.constant(is_special_table, tf.bool), token_ids)
    candidate = tf.logical_and(
        tf.cast(padding_mask, tf.bool), tf.logical_not(is_special)
    )
    num_candidates = tf.reduce_sum(tf.cast(candidate, tf.int32), axis=1)
    wanted = tf.cast(
        tf.floor(mask_rate * tf.cast(num_candidates, tf.float32) + 0.5),
        tf.int32,
    )
    count = tf.minimum(max_predictions, tf.maximum(1, wanted))
    count = tf.where(num_candidates > 0, count, 0)

    # A uniform random subset of `count` candidates: the top scores.
    scores = tf.random.stateless_uniform(tf.shape(token_ids), seed)
    scores = tf.where(candidate, scores, -1.0)
    _, top_positions = tf.math.top_k(scores, k=max_predictions, sorted=True)
    slot = tf.range(max_predictions)[tf.newaxis, :]
    chosen = slot < count[:, tf.newaxis]
    big = tf.shape(token_ids)[1]
    positions = tf.sort(tf.where(chosen, top_positions, big), axis=1)
    chosen = positions < big  # After sorting the chosen slots come first.
    positions = tf.where(chosen, positions, 0)
    return positions, chosen


def _new_values(
    tf, originals, decision_seed, token_seed, mask_id, replacement_id_array
):
    """What each chosen token becomes: `[MASK]` (`MASK_TOKEN_RATE`), a
    random non-special token (`RANDOM_TOKEN_RATE`), else itself."""
    decisions = tf.random.stateless_uniform(tf.shape(originals), decision_seed)
    replacement_id_array = tf.constant(replacement_id_array, tf.int32)
    random_tokens = tf.gather(
        replacement_id_array,
        tf.random.stateless_uniform(
            tf.shape(originals),
            token_seed,
            minval=0,
            maxval=tf.shape(replacement_id_array)[0],
            dtype=tf.int32,
        ),
    )
    return tf.where(
        decisions < MASK_TOKEN_RATE,
        mask_id,
        tf.where(
            decisions < MASK_TOKEN_RATE + RANDOM_TOKEN_RATE,
            random_tokens,
            originals,
        ),
    )
