"""The study's decision rule (`paired_stats`): the paired t-test against
closed forms of Student's t, a numeric integration of its density and
SciPy's own tests, Holm against a NumPy re-implementation and cases worked
by hand, and the edge cases the module decides."""

import math

import numpy as np
import pytest
from scipy import special
from scipy import stats

from tupe_tf.analysis import paired_stats


def _t(differences):
    """Student's t of the mean of `differences` against 0."""
    n = len(differences)
    mean = sum(differences) / n
    sd = math.sqrt(sum((d - mean) ** 2 for d in differences) / (n - 1))
    return mean / (sd / math.sqrt(n))


def _two_sided_p_by_integration(t, df, steps=20000):
    """2 x the t density integrated from |t| to infinity (Simpson's rule
    on u = 1 / (1 + x^2 / df), which maps the tail to (0, u(|t|)])."""
    # With x = sqrt(df (1 - u) / u) the tail is the incomplete beta
    # integral of u^(df/2 - 1) (1 - u)^(-1/2) / B(df/2, 1/2) over
    # [0, u(|t|)]; the factor 2 of the two sides cancels the 1/2 of the
    # change of variable. For df >= 2 the integrand is finite at 0.
    end = 1.0 / (1.0 + t * t / df)
    beta = math.gamma(df / 2) * math.gamma(0.5) / math.gamma(df / 2 + 0.5)

    def f(u):
        return u ** (df / 2 - 1) * (1 - u) ** -0.5 / beta

    h = end / steps
    total = f(0.0) + f(end)
    total += 4 * sum(f((2 * k - 1) * h) for k in range(1, steps // 2 + 1))
    total += 2 * sum(f(2 * k * h) for k in range(1, steps // 2))
    return total * h / 3


def _numpy_holm(p_values):
    p = np.asarray(p_values, dtype=float)
    order = np.argsort(p, kind="stable")
    steps = (len(p) - np.arange(len(p))) * p[order]
    adjusted = np.empty_like(p)
    adjusted[order] = np.minimum(np.maximum.accumulate(steps), 1.0)
    return adjusted


def test_paired_t_p_by_hand():
    # [1, 2, 3]: mean 2, sd 1, t = 2 / (1 / sqrt 3) = 3.464 on 2 degrees of
    # freedom, where the two-sided p is 1 - t / sqrt(t^2 + 2).
    t = 2 * math.sqrt(3)
    assert _t([1.0, 2.0, 3.0]) == pytest.approx(t)
    assert 1 - t / math.sqrt(t * t + 2) == pytest.approx(0.0742, abs=1e-4)
    assert paired_stats.paired_t_p([1.0, 2.0, 3.0]) == pytest.approx(
        1 - t / math.sqrt(t * t + 2), rel=1e-9
    )
    assert paired_stats.paired_t_p([-3.0, -2.0, -1.0]) == pytest.approx(
        0.0741799, rel=1e-6
    )
    # [1, 3]: mean 2, sd sqrt 2, t = 2 on 1 degree of freedom (Cauchy):
    # p = 1 - (2 / pi) atan(2) = 0.295.
    assert paired_stats.paired_t_p([1.0, 3.0]) == pytest.approx(
        1 - 2 / math.pi * math.atan(2.0), rel=1e-9
    )
    # A consistent gap of 0.9 on 5 seeds, [0.8, 1.0]: sd 0.079, t = 25.46
    # on 4 degrees of freedom, where with x = t / sqrt(4 + t^2) the
    # two-sided p is 1 - x (1 + (1 - x^2) / 2): 1.4e-5.
    gap = [0.8, 0.9, 1.0, 0.85, 0.95]
    t = _t(gap)
    assert t == pytest.approx(0.9 / math.sqrt(0.00625 / 5))
    x = t / math.sqrt(4 + t * t)
    assert paired_stats.paired_t_p(gap) == pytest.approx(
        1 - x * (1 + (1 - x * x) / 2), rel=1e-6
    )
    assert paired_stats.paired_t_p(gap) == pytest.approx(1.414e-5, rel=1e-3)


@pytest.mark.parametrize(
    "differences",
    [
        [1.0, 2.0, 3.0],
        [-1.0, 1.0, 2.0],
        [0.8, 0.9, 1.0, 0.85, 0.95],
        [-0.3, 0.1, -0.2, -0.05, -0.4, 0.02],
    ],
)
def test_paired_t_p_matches_a_numeric_integration(differences):
    t, df = _t(differences), len(differences) - 1
    expected = _two_sided_p_by_integration(t, df)
    assert paired_stats.paired_t_p(differences) == pytest.approx(
        expected, rel=1e-6, abs=1e-12
    )
    # And SciPy's Student's t CDF, called directly.
    assert expected == pytest.approx(
        2 * special.stdtr(df, -abs(t)), rel=1e-6, abs=1e-12
    )


@pytest.mark.parametrize("n", [2, 3, 5, 8])
def test_paired_t_p_matches_scipy_tests(n):
    rng = np.random.default_rng(n)
    for _ in range(20):
        a, b = rng.normal(5.0, 1.0, size=(2, n))
        differences = list(a - b)
        p = paired_stats.paired_t_p(differences)
        assert p == pytest.approx(
            stats.ttest_1samp(differences, 0.0).pvalue, rel=1e-9
        )
        assert p == pytest.approx(stats.ttest_rel(a, b).pvalue, rel=1e-9)


def test_paired_t_p_edge_cases():
    # Fewer than 2 pairs: no spread to test against, no conclusion.
    assert paired_stats.paired_t_p([]) == 1.0
    assert paired_stats.paired_t_p([5.0]) == 1.0
    # Zero spread: every seed agrees exactly; called (p 0) where the
    # difference is not 0, not where it is.
    assert paired_stats.paired_t_p([0.5, 0.5, 0.5]) == 0.0
    assert paired_stats.paired_t_p([-0.031, -0.031]) == 0.0
    assert paired_stats.paired_t_p([0.0, 0.0, 0.0]) == 1.0
    # Continuous with the limit: agreeing to within rounding is as good.
    assert paired_stats.paired_t_p([0.1 + 0.2, 0.3, 0.3]) < 1e-9
    # A mean of exactly 0 with a spread: t = 0.
    assert paired_stats.paired_t_p([1.0, -1.0]) == pytest.approx(1.0)


def test_holm_by_hand():
    # Sorted: 0.005 x 4 = 0.02, 0.01 x 3 = 0.03, 0.03 x 2 = 0.06, 0.04 x 1
    # = 0.04, raised to the 0.06 before it.
    adjusted = paired_stats.holm([0.01, 0.04, 0.03, 0.005])
    assert adjusted == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # Capped at 1.
    assert paired_stats.holm([0.5, 0.6]) == [1.0, 1.0]
    assert paired_stats.holm([0.2]) == [0.2]
    assert paired_stats.holm([]) == []
    # Ties share one adjusted value: 0.01 x 3 = 0.03, then 0.01 x 2 raised
    # to it, 0.04 x 1 = 0.04.
    assert paired_stats.holm([0.01, 0.04, 0.01]) == pytest.approx(
        [0.03, 0.04, 0.03]
    )


def test_holm_matches_numpy():
    rng = np.random.default_rng(0)
    for m in (1, 2, 5, 14, 30):
        p = list(rng.uniform(0, 0.2, size=m))
        p[: m // 2] = [0.25] * (m // 2)
        np.testing.assert_allclose(paired_stats.holm(p), _numpy_holm(p))


def test_paired_pairs_by_seed():
    c = paired_stats.paired(
        {0: 5.0, 1: 5.5, 2: 6.0, 3: None, 4: 1.0},
        {0: 6.0, 1: 6.0, 2: 6.25, 3: 1.0, 5: 1.0},
    )
    # Seeds 0, 1, 2: differences -1.0, -0.5, -0.25.
    assert (c.n, c.low, c.high) == (3, -1.0, -0.25)
    assert c.mean == pytest.approx(-7 / 12)
    assert c.p == pytest.approx(
        stats.ttest_1samp([-1.0, -0.5, -0.25], 0.0).pvalue
    )
    assert c.p_holm is None and not c.different
    assert paired_stats.paired({0: 1.0}, {1: 1.0}) is None
    assert paired_stats.paired({0: math.nan}, {0: 1.0}) is None
    # One common seed: a difference, no conclusion.
    assert paired_stats.paired({0: 2.0}, {0: 1.0}).p == 1.0


def test_decide_corrects_within_the_family():
    # A consistent gap of 0.9 on 5 seeds (p 1.4e-5) is called alone and
    # in a family of 14 (Holm 14 x 1.4e-5 = 2e-4).
    gap = dict(enumerate([0.8, 0.9, 1.0, 0.85, 0.95]))
    zero = dict.fromkeys(range(5), 0.0)
    alone = paired_stats.decide({"a": paired_stats.paired(gap, zero)})
    assert alone["a"].p_holm == alone["a"].p and alone["a"].different
    family = {k: paired_stats.paired(zero, zero) for k in range(13)}
    family["gap"] = paired_stats.paired(gap, zero)
    decided = paired_stats.decide(family)
    assert decided["gap"].p_holm == pytest.approx(14 * alone["a"].p)
    assert decided["gap"].different
    assert not any(decided[k].different for k in range(13))
    # [1, 2, 3] (p 0.074) alone is not called. Six seeds 1..6 (p 0.0059)
    # are, also beside a second such comparison (Holm 2 x 0.0059 = 0.012).
    three = paired_stats.paired({0: 1.0, 1: 2.0, 2: 3.0}, zero)
    assert not paired_stats.decide({"a": three})["a"].different
    six = {seed: 1.0 + seed for seed in range(6)}
    zeros = dict.fromkeys(range(6), 0.0)
    two = paired_stats.decide(
        {
            "a": paired_stats.paired(six, zeros),
            "b": paired_stats.paired(zeros, six),
            "none": None,
        }
    )
    assert two["a"].p == pytest.approx(0.0059335, rel=1e-4)
    assert two["a"].p_holm == pytest.approx(2 * two["a"].p)
    assert two["a"].different and two["b"].different
    assert two["none"] is None
    # Ten such comparisons: 10 x 0.0059 = 0.059 > 0.05.
    ten = paired_stats.decide(
        {k: paired_stats.paired(six, zeros) for k in range(10)}
    )
    assert not any(c.different for c in ten.values())


def test_formats():
    # Differences -1, +1, +2: mean 2/3, sd sqrt(7/3), t = 0.756 on 2
    # degrees of freedom, p = 1 - t / sqrt(t^2 + 2) = 0.529.
    c = paired_stats.decide(
        {
            "a": paired_stats.paired(
                {0: 1.0, 1: 3.0, 2: 4.0}, {0: 2.0, 1: 2.0, 2: 2.0}
            )
        }
    )["a"]
    t = (2 / 3) / math.sqrt(7 / 3 / 3)
    assert c.p == pytest.approx(1 - t / math.sqrt(t * t + 2))
    assert paired_stats.format_difference(c) == "+0.667 [-1.000, +2.000]"
    assert paired_stats.describe(c) == (
        "+0.667 [-1.000, +2.000], n 3, p 0.53, Holm 0.53"
    )
    one = paired_stats.paired({0: 1.0}, {0: 2.5})
    assert paired_stats.format_difference(one) == "-1.500"
    assert paired_stats.describe(one) == "-1.500, n 1, p 1"
    assert paired_stats.describe(None) == "-"
    called = paired_stats.decide(
        {
            "a": paired_stats.paired(
                {0: 1.0, 1: 2.0, 2: 3.0, 3: 4.0, 4: 5.0, 5: 6.0},
                dict.fromkeys(range(6), 0.0),
            )
        }
    )["a"]
    assert paired_stats.describe(called).endswith("Holm 0.0059 (different)")
