"""The study's one decision rule: paired differences per seed.

Two variants are compared by the differences of their runs at the same
seed: runs of one seed share the data order (batches and masks) and the
initial value of shared weights (tests/analysis/test_study_pairing.py
says which), so the seed's own luck cancels in the difference. The rule:

1. an exact sign-flip permutation test of the mean paired difference:
   without a difference each difference is as likely negative as
   positive, so all 2^n sign patterns are equally likely, and p is the
   share of them whose mean is at least as far from 0 as the observed;
2. Holm's step-down correction over each family of comparisons;
3. "different" where the corrected p is at most `ALPHA`.

Beside each claim: the mean and the min-max of the per-seed differences,
with their number. With n pairs the smallest p is 2 / 2^n (the observed
pattern and its mirror), 0.25 with 3 seeds: on 3 seeds nothing can be
called different at 0.05, whatever the data (`seeds_needed`).

Pure Python (no NumPy, no TensorFlow).

Example:

>>> sign_flip_p([-0.9, -1.0, -1.1])
0.25
>>> holm([0.01, 0.04, 0.03])
[0.03, 0.06, 0.06]
>>> seeds_needed(1), seeds_needed(14)
(6, 10)
"""

import dataclasses
import itertools
import math

ALPHA = 0.05


@dataclasses.dataclass(frozen=True)
class Paired:
    """One comparison: `a - b` over the seeds both have.

    `p` is the sign-flip test's; `p_holm` its Holm correction within the
    comparison's family (`decide`), `None` until then.
    """

    n: int
    mean: float
    low: float
    high: float
    p: float
    p_holm: float = None

    @property
    def different(self):
        """Whether the rule calls the two different."""
        return self.p_holm is not None and self.p_holm <= ALPHA


def _usable(value):
    return value is not None and not math.isnan(float(value))


def sign_flip_p(differences):
    """Two-sided p of the mean of `differences` under random signs.

    Enumerates all 2^n sign patterns (n is a handful of seeds); 1.0 for
    no differences.
    """
    n = len(differences)
    if not n:
        return 1.0
    observed = abs(sum(differences))
    # Patterns equal to the observed in exact arithmetic may differ from it
    # in the last bits of a float sum; they count as at least as extreme.
    tolerance = 1e-9 * sum(abs(d) for d in differences)
    extreme = sum(
        abs(sum(s * d for s, d in zip(signs, differences)))
        >= observed - tolerance
        for signs in itertools.product((1, -1), repeat=n)
    )
    return extreme / 2**n


def holm(p_values):
    """Holm's step-down adjusted p-values, in the order given.

    The k-th smallest p (from 0) is multiplied by m - k, capped at 1, and
    made no smaller than any before it in that order.
    """
    m = len(p_values)
    adjusted = [None] * m
    running = 0.0
    for k, index in enumerate(sorted(range(m), key=lambda i: p_values[i])):
        running = max(running, min(1.0, (m - k) * p_values[index]))
        adjusted[index] = running
    return adjusted


def smallest_p(n):
    """The smallest p `sign_flip_p` can give on `n` pairs."""
    return 2 / 2**n if n else 1.0


def seeds_needed(family_size, alpha=ALPHA):
    """The fewest pairs with which the first of `family_size` comparisons
    can be called different (Holm multiplies its p by the family size)."""
    n = 1
    while smallest_p(n) * family_size > alpha:
        n += 1
    return n


def paired(a, b):
    """`Paired` of `a - b` over their common seeds (`{seed: value}`;
    None and NaN dropped); `None` when they share no seed."""
    seeds = sorted(s for s in a if s in b and _usable(a[s]) and _usable(b[s]))
    if not seeds:
        return None
    differences = [float(a[s]) - float(b[s]) for s in seeds]
    return Paired(
        n=len(seeds),
        mean=sum(differences) / len(seeds),
        low=min(differences),
        high=max(differences),
        p=sign_flip_p(differences),
    )


def decide(family):
    """`{key: Paired}` with `p_holm` set, Holm over `family`'s comparisons
    (`None` entries, pairs without a common seed, are kept as `None`)."""
    keys = [k for k, c in family.items() if c is not None]
    adjusted = dict(zip(keys, holm([family[k].p for k in keys])))
    return {
        k: c if c is None else dataclasses.replace(c, p_holm=adjusted[k])
        for k, c in family.items()
    }


def format_difference(c, digits=3):
    """`-0.976 [-1.026, -0.887]` (signed mean [min, max]), the mean alone
    for one pair, `-` for none."""
    if c is None:
        return "-"
    form = f"+.{digits}f"
    if c.n == 1:
        return format(c.mean, form)
    return f"{c.mean:{form}} [{c.low:{form}}, {c.high:{form}}]"


def describe(c, digits=3):
    """A table cell: the difference, n, p and Holm's p, and `different`
    where the rule says so."""
    if c is None:
        return "-"
    text = f"{format_difference(c, digits)}, n {c.n}, p {c.p:.2g}"
    if c.p_holm is not None:
        text += f", Holm {c.p_holm:.2g}"
    return text + (" (different)" if c.different else "")
