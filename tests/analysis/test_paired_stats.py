"""The study's decision rule (`paired_stats`) against a NumPy re-implementation
and cases worked by hand."""

import itertools
import math

import numpy as np
import pytest

from tupe_tf.analysis import paired_stats


def _numpy_sign_flip_p(differences):
    d = np.asarray(differences, dtype=float)
    signs = np.array(list(itertools.product([1.0, -1.0], repeat=len(d))))
    means = np.abs((signs * d).mean(axis=1))
    return float(np.mean(means >= abs(d.mean()) - 1e-12))


def _numpy_holm(p_values):
    p = np.asarray(p_values, dtype=float)
    order = np.argsort(p, kind="stable")
    steps = (len(p) - np.arange(len(p))) * p[order]
    adjusted = np.empty_like(p)
    adjusted[order] = np.minimum(np.maximum.accumulate(steps), 1.0)
    return adjusted


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6])
def test_sign_flip_p_matches_numpy(n):
    rng = np.random.default_rng(n)
    for _ in range(20):
        differences = list(rng.normal(0.1, 1.0, size=n))
        assert paired_stats.sign_flip_p(differences) == pytest.approx(
            _numpy_sign_flip_p(differences)
        )
    # Rounded values tie across sign patterns.
    ties = list(np.round(rng.normal(size=n), 1))
    assert paired_stats.sign_flip_p(ties) == pytest.approx(
        _numpy_sign_flip_p(ties)
    )


def test_sign_flip_p_by_hand():
    # Same sign in every seed: only the observed pattern and its mirror
    # are as extreme, 2 of 2^3.
    assert paired_stats.sign_flip_p([1.0, 2.0, 3.0]) == 0.25
    assert paired_stats.sign_flip_p([-0.9, -1.0, -1.1]) == 0.25
    # 3 + 1 - 1 = 3: the sums +-3 +-1 +-1 are 5, 3, 3, 1, -1, -3, -3, -5;
    # six are at least 3 away from 0.
    assert paired_stats.sign_flip_p([3.0, 1.0, -1.0]) == 0.75
    # A mean of 0 is matched by every pattern.
    assert paired_stats.sign_flip_p([1.0, -1.0]) == 1.0
    # One pair: both patterns are as extreme.
    assert paired_stats.sign_flip_p([5.0]) == 1.0
    assert paired_stats.sign_flip_p([]) == 1.0
    # Six seeds of one sign: 2 of 64.
    assert paired_stats.sign_flip_p([1, 2, 3, 4, 5, 6]) == 2 / 64


def test_the_smallest_p_and_the_seeds_a_family_needs():
    assert [paired_stats.smallest_p(n) for n in (0, 1, 2, 3)] == [
        1.0,
        1.0,
        0.5,
        0.25,
    ]
    # 2 / 2^n <= 0.05 / m: n = 6 alone (1/32 = 0.031), 10 for 14 pairs
    # (1/512 <= 0.0036), 11 for 30 (1/1024 <= 0.0017).
    assert paired_stats.seeds_needed(1) == 6
    assert paired_stats.seeds_needed(14) == 10
    assert paired_stats.seeds_needed(30) == 11


def test_holm_by_hand():
    # Sorted: 0.005 x 4 = 0.02, 0.01 x 3 = 0.03, 0.03 x 2 = 0.06, 0.04 x 1
    # = 0.04, raised to the 0.06 before it.
    adjusted = paired_stats.holm([0.01, 0.04, 0.03, 0.005])
    assert adjusted == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # Capped at 1.
    assert paired_stats.holm([0.5, 0.6]) == [1.0, 1.0]
    assert paired_stats.holm([0.2]) == [0.2]
    assert paired_stats.holm([]) == []


def test_holm_matches_numpy():
    rng = np.random.default_rng(0)
    for m in (1, 2, 5, 14, 30):
        p = list(rng.uniform(0, 0.2, size=m))
        # Ties, as the few values of a sign-flip test give.
        p[: m // 2] = [0.25] * (m // 2)
        np.testing.assert_allclose(paired_stats.holm(p), _numpy_holm(p))


def test_paired_pairs_by_seed():
    c = paired_stats.paired(
        {0: 5.0, 1: 5.5, 2: 6.0, 3: None, 4: 1.0},
        {0: 6.0, 1: 6.0, 2: 6.25, 3: 1.0, 5: 1.0},
    )
    # Seeds 0, 1, 2: differences -1.0, -0.5, -0.25.
    assert (c.n, c.low, c.high, c.p) == (3, -1.0, -0.25, 0.25)
    assert c.mean == pytest.approx(-7 / 12)
    assert c.p_holm is None and not c.different
    assert paired_stats.paired({0: 1.0}, {1: 1.0}) is None
    assert paired_stats.paired({0: math.nan}, {0: 1.0}) is None


def test_decide_corrects_within_the_family():
    six = {seed: 1.0 + seed for seed in range(6)}
    zero = dict.fromkeys(range(6), 0.0)
    alone = paired_stats.decide({"a": paired_stats.paired(six, zero)})
    # 2/64 = 0.031 <= 0.05: the rule calls a single comparison different.
    assert alone["a"].p_holm == 2 / 64 and alone["a"].different
    # Two such comparisons: Holm doubles the smaller, 0.0625 > 0.05.
    two = paired_stats.decide(
        {
            "a": paired_stats.paired(six, zero),
            "b": paired_stats.paired(zero, six),
            "none": None,
        }
    )
    assert two["a"].p_holm == pytest.approx(0.0625)
    assert not two["a"].different and not two["b"].different
    assert two["none"] is None
    # On three seeds nothing is called, however consistent.
    three = paired_stats.paired(
        {0: 9.0, 1: 9.0, 2: 9.0}, dict.fromkeys(range(3), 0)
    )
    assert not paired_stats.decide({"a": three})["a"].different


def test_formats():
    # Differences -1, +1, +2: of the sums +-1 +-1 +-2, six are at least 2
    # away from 0.
    c = paired_stats.decide(
        {
            "a": paired_stats.paired(
                {0: 1.0, 1: 3.0, 2: 4.0}, {0: 2.0, 1: 2.0, 2: 2.0}
            )
        }
    )["a"]
    assert paired_stats.format_difference(c) == "+0.667 [-1.000, +2.000]"
    assert paired_stats.describe(c) == (
        "+0.667 [-1.000, +2.000], n 3, p 0.75, Holm 0.75"
    )
    one = paired_stats.paired({0: 1.0}, {0: 2.5})
    assert paired_stats.format_difference(one) == "-1.500"
    assert paired_stats.describe(one) == "-1.500, n 1, p 1"
    assert paired_stats.describe(None) == "-"
    called = paired_stats.decide(
        {
            "a": paired_stats.paired(
                dict.fromkeys(range(6), 1.0), dict.fromkeys(range(6), 0.0)
            )
        }
    )["a"]
    assert paired_stats.describe(called).endswith("Holm 0.031 (different)")
