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

Whole-word masking (`--whole_word_masking`, as BERT's
`create_pretraining_data.py --do_whole_word_mask`): a word is a candidate
followed by the `##` continuation pieces after it. Words are taken in a
random order while they fit the same budget; a word that would exceed it is
skipped, so a word is always masked whole and the budget never exceeded.
The 80/10/10 choice stays per token. With one token per word the masks are
exactly the per-token ones (the same random numbers order the words).
"""

import dataclasses

import numpy as np

from tupe_tf.utils.errors import UserError
from tupe_tf.utils.settings import Settings
from tupe_tf.utils.settings import setting

MASK_TOKEN_RATE = 0.8
RANDOM_TOKEN_RATE = 0.1
CONTINUATION_PREFIX = "##"


@dataclasses.dataclass(kw_only=True)
class WholeWordMaskingSettings(Settings):
    """The whole-word masking flag of the shard builder and of
    pre-training (keyword-only, so configs that inherit it keep their own
    field order)."""

    whole_word_masking: bool = setting(
        False,
        help="Mask every WordPiece of a chosen word together (words are "
        "told apart by the vocabulary's ## continuation pieces); the "
        "budget (--mask_rate, --max_predictions_per_seq) and the 80/10/10 "
        "split per token stay.",
    )


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


def continuation_table(vocabulary):
    """bool `[vocab_size]`, true for the `##` continuation pieces of
    `vocabulary` (a `vocab.Vocabulary`), which whole-word masking needs.

    Raises:
      UserError: the vocabulary has no `##` piece, naming it and the flag.
    """
    table = np.array(
        [t.startswith(CONTINUATION_PREFIX) for t in vocabulary.tokens], bool
    )
    if not table.any():
        raise UserError(
            f"--whole_word_masking: vocabulary {vocabulary.path} has no "
            f"'{CONTINUATION_PREFIX}' continuation pieces, so its words "
            "cannot be told apart; use a WordPiece vocabulary "
            "(scripts/build_vocab.py writes one) or leave the flag out."
        )
    return table


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
    continuation_table=None,
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
      continuation_table: bool `[vocab_size]`, true for `##` pieces
        (`continuation_table(vocabulary)`): whole-word masking; `None`:
        per-token masking.

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
    candidate, count = _candidates_and_budget(
        token_ids, padding_mask, mask_rate, max_predictions, is_special_table
    )
    # Tokens and words are taken in the order of the same random scores.
    scores = tf.random.stateless_uniform(shape, seeds[0])
    if continuation_table is None:
        positions, chosen = _chosen_positions(
            candidate, count, scores, max_predictions
        )
    else:
        starts = _word_starts(token_ids, candidate, continuation_table)
        positions, chosen = _chosen_word_positions(
            candidate, starts, count, scores, max_predictions
        )
    originals = tf.gather(token_ids, positions, batch_dims=1)
    new_values = _new_values(
        originals, seeds[1], seeds[2], mask_id, replacement_id_array
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


def _chosen_positions(candidate, count, scores, max_predictions):
    """`(positions [B, P], chosen [B, P])`: each row's `count` candidates
    of the highest `scores` (uniform: a uniform random subset), in
    increasing position order; unused slots hold position 0 and `chosen`
    False."""
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    scores = tf.where(candidate, scores, -1.0)
    _, top_positions = tf.math.top_k(scores, k=max_predictions, sorted=True)
    slot = tf.range(max_predictions)[tf.newaxis, :]
    chosen = slot < count[:, tf.newaxis]
    big = tf.shape(candidate)[1]
    positions = tf.sort(tf.where(chosen, top_positions, big), axis=1)
    chosen = positions < big  # After sorting the chosen slots come first.
    positions = tf.where(chosen, positions, 0)
    return positions, chosen


def _candidates_and_budget(
    token_ids, padding_mask, mask_rate, max_predictions, is_special_table
):
    """`(candidate [B, S], count [B])`: the maskable tokens (real,
    non-special), and how many of them each row masks: `mask_rate` of
    them rounded, at least 1 and at most `max_predictions`."""
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

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
    return candidate, tf.where(num_candidates > 0, count, 0)


def _chosen_word_positions(candidate, starts, count, scores, max_predictions):
    """`_chosen_positions` for whole words (which begin at `starts`): the
    words in the order of their first token's score, each taken if it
    still fits the row's budget `count`."""
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    # Words are numbered in each row from 0; tokens before the first word
    # (never candidates) count as word 0 and are masked out below.
    word = tf.maximum(tf.cumsum(tf.cast(starts, tf.int32), axis=1) - 1, 0)
    width = tf.shape(candidate)[1]

    def per_word(words, values):
        # A sum per word id (dense bincount: cheaper than a scatter on CPU).
        return tf.math.bincount(
            words, weights=values, minlength=width, maxlength=width, axis=-1
        )

    length = tf.cast(per_word(word, tf.cast(candidate, tf.float32)), tf.int32)
    # A word has one start, so the sum is its first token's score.
    word_scores = per_word(word, tf.where(starts, scores, 0.0))
    word_scores = tf.where(length > 0, word_scores, -1.0)
    order, taken = _words_taken(word_scores, length, count, max_predictions)
    word_taken = per_word(order, tf.cast(taken, tf.float32))
    token_taken = tf.logical_and(
        candidate, tf.gather(word_taken, word, batch_dims=1) > 0
    )
    # The taken positions ascending (at most `count <= P` of them).
    negative, _ = tf.math.top_k(
        -tf.where(token_taken, tf.range(width)[tf.newaxis, :], width),
        k=max_predictions,
        sorted=True,
    )
    chosen = -negative < width
    return tf.where(chosen, -negative, 0), chosen


def _words_taken(word_scores, length, budget, max_predictions):
    """`(order [B, W], taken [B, W])`: the words in descending score order
    (ties: lower index first) and which of them `_greedy_fit` takes.

    A row takes at most `budget <= max_predictions` tokens, so in practice
    its taken words are among its first `2 * max_predictions` in order
    (most words are one token). The fit runs on those first; only when a
    row still has budget left and a later word that would fit does it run
    again on every word, so the result is always the full fit's.
    """
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    width = tf.shape(word_scores)[1]
    head = tf.minimum(width, 2 * max_predictions)
    _, order = tf.math.top_k(word_scores, k=head, sorted=True)
    ordered = tf.gather(length, order, batch_dims=1)
    taken = _greedy_fit(ordered, budget)
    left = budget - tf.reduce_sum(tf.where(taken, ordered, 0), axis=1)
    # The words past the first `head`: those scored below the last listed
    # one (a tie with it, rare, counts as past: the full fit then runs).
    last = tf.gather(word_scores, order[:, -1:], batch_dims=1)
    later = tf.logical_or(
        word_scores < last,
        tf.logical_and(
            word_scores == last,
            tf.reduce_sum(tf.cast(word_scores >= last, tf.int32), axis=1)[
                :, tf.newaxis
            ]
            > head,
        ),
    )
    later_fits = tf.logical_and(
        tf.logical_and(later, length > 0), length <= left[:, tf.newaxis]
    )

    def every_word():
        full = tf.argsort(
            word_scores, axis=1, direction="DESCENDING", stable=True
        )
        return full, _greedy_fit(tf.gather(length, full, batch_dims=1), budget)

    return tf.cond(
        tf.reduce_any(later_fits), every_word, lambda: (order, taken)
    )


def _word_starts(token_ids, candidate, continuation_table):
    """bool `[B, S]`: the candidates that begin a word, i.e. all but the
    `##` pieces that follow a candidate."""
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    is_piece = tf.gather(tf.constant(continuation_table, tf.bool), token_ids)
    previous_candidate = tf.pad(candidate[:, :-1], [[0, 0], [1, 0]])
    return tf.logical_and(
        candidate, tf.logical_not(tf.logical_and(is_piece, previous_candidate))
    )


def _greedy_fit(lengths, budget):
    """bool `[B, W]`: which of the words of `lengths` (in order; 0: no
    word) are taken when each is taken if it fits what is left of the
    row's `budget` `[B]`, else skipped.

    Vectorized in rounds: a word longer than what is left can never fit
    (the rest only shrinks), and of the others the longest prefix that
    fits is taken at once. Each round takes at least one word, and after
    the first what is left is shorter than the longest word.
    """
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    undecided = lengths > 0
    taken = tf.zeros_like(undecided)

    def fit_round(undecided, taken, budget):
        undecided = tf.logical_and(undecided, lengths <= budget[:, tf.newaxis])
        total = tf.cumsum(tf.where(undecided, lengths, 0), axis=1)
        fits = tf.logical_and(undecided, total <= budget[:, tf.newaxis])
        budget -= tf.reduce_sum(tf.where(fits, lengths, 0), axis=1)
        return (
            tf.logical_and(undecided, tf.logical_not(fits)),
            tf.logical_or(taken, fits),
            budget,
        )

    def can_take(undecided, taken, budget):
        del taken
        return tf.reduce_any(
            tf.logical_and(undecided, lengths <= budget[:, tf.newaxis])
        )

    _, taken, _ = tf.while_loop(can_take, fit_round, (undecided, taken, budget))
    return taken


def _new_values(
    originals, decision_seed, token_seed, mask_id, replacement_id_array
):
    """What each chosen token becomes: `[MASK]` (`MASK_TOKEN_RATE`), a
    random non-special token (`RANDOM_TOKEN_RATE`), else itself."""
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

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
