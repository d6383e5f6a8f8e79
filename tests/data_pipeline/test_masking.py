"""Masking statistics, special tokens and determinism."""

import numpy as np
import pytest

from data_pipeline import masking

PAD, UNK, CLS, SEP, MASK = 0, 1, 2, 3, 4
SPECIAL = np.array([PAD, UNK, CLS, SEP, MASK])
VOCAB_SIZE = 200
REPLACEMENT = masking.replacement_ids(VOCAB_SIZE, SPECIAL)


def _batch(rng, batch=256, seq=128):
    ids = np.full([batch, seq], PAD, np.int32)
    for b in range(batch):
        n = rng.integers(20, seq + 1)
        ids[b, :n] = rng.integers(5, VOCAB_SIZE, size=n)
        ids[b, 0] = CLS
        ids[b, n - 1] = SEP
        ids[b, n // 2] = SEP  # a document boundary
    return ids


def _check_stats(original, masked, positions, label_ids, weights, padding):
    chosen = weights > 0
    rows = np.nonzero(chosen)[0]
    pos = positions[chosen]
    # Labels are the original tokens; never special tokens.
    np.testing.assert_array_equal(label_ids[chosen], original[rows, pos])
    assert not np.isin(original[rows, pos], SPECIAL).any()
    # Positions sorted, unused slots zero.
    for b in range(len(positions)):
        k = int(chosen[b].sum())
        assert np.all(np.diff(positions[b, :k]) > 0)
        assert np.all(positions[b, k:] == 0) and np.all(label_ids[b, k:] == 0)
    # Unchosen tokens unchanged.
    changed = masked != original
    chosen_dense = np.zeros_like(changed)
    chosen_dense[rows, pos] = True
    assert not (changed & ~chosen_dense).any()
    # 15% of candidates.
    candidates = (padding > 0) & ~np.isin(original, SPECIAL)
    rate = chosen.sum() / candidates.sum()
    assert 0.14 < rate < 0.16, rate
    # 80% [MASK] / 10% random / 10% kept.
    new = masked[rows, pos]
    frac_mask = np.mean(new == MASK)
    frac_kept = np.mean(new == original[rows, pos])
    assert 0.77 < frac_mask < 0.83, frac_mask
    # A random replacement equals the original 1/195 of the time.
    assert 0.08 < frac_kept < 0.125, frac_kept
    assert 0.08 < 1 - frac_mask - frac_kept < 0.12
    # Random replacements are never special tokens.
    assert not np.isin(new[new != MASK], SPECIAL).any()


def test_each_row_masks_its_budget():
    # Rows of 0, 3, 10 (1.5 rounds half up) and 1,000 candidates.
    ids = np.full([4, 1002], PAD, np.int32)
    for row, candidates in enumerate([0, 3, 10, 1000]):
        ids[row, : candidates + 2] = [CLS] + [7] * candidates + [SEP]
    weights = _tf_mask(ids, [1, 2], p=20)[3]
    assert weights.sum(axis=1).tolist() == [0, 1, 2, 20]


def test_replacement_ids_exclude_specials():
    ids = masking.replacement_ids(10, [0, 3, 9])
    assert ids.tolist() == [1, 2, 4, 5, 6, 7, 8]


def _tf_mask(ids, seed, p=30):
    is_special = np.zeros([VOCAB_SIZE], bool)
    is_special[SPECIAL] = True
    out = masking.mask_batch(
        ids,
        ids != PAD,
        seed,
        mask_rate=0.15,
        max_predictions=p,
        mask_id=MASK,
        is_special_table=is_special,
        replacement_id_array=REPLACEMENT,
    )
    return [t.numpy() for t in out]


def test_dynamic_tf_masking_statistics():
    original = _batch(np.random.default_rng(3), batch=512)
    masked, positions, labels, weights = _tf_mask(original, [5, 0])
    _check_stats(
        original,
        masked,
        positions,
        labels,
        weights,
        (original != PAD).astype(np.int32),
    )


def test_dynamic_masking_is_a_function_of_the_seed():
    original = _batch(np.random.default_rng(4), batch=8)
    a = _tf_mask(original, [1, 2])
    b = _tf_mask(original, [1, 2])
    c = _tf_mask(original, [1, 3])
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(a[1], c[1])


def test_max_predictions_caps_and_short_rows():
    ids = np.array(
        [[CLS, 10, 11, SEP, PAD, PAD], [CLS, SEP, PAD, PAD, PAD, PAD]], np.int32
    )
    _, positions, labels, weights = _tf_mask(ids, [0, 0], p=2)
    assert weights[0].tolist() == [1.0, 0.0]  # max(1, round(0.3)) = 1
    assert positions[0, 0] in (1, 2)
    assert weights[1].tolist() == [0.0, 0.0]  # no candidates at all


def test_max_predictions_larger_than_sequence_is_an_error():
    with pytest.raises(ValueError, match="max_predictions_per_seq"):
        _tf_mask(np.zeros([1, 4], np.int32), [0, 0], p=5)
