"""The study's one decision rule: paired differences per seed.

Two variants are compared by the differences of their runs at the same
seed: runs of one seed share the data order (batches and masks) and the
initial value of shared weights (tests/analysis/test_study_pairing.py
says which), so the seed's own luck cancels in the difference. The rule:

1. a paired t-test of the mean difference (Student's t on the n per-seed
   differences, two-sided, n - 1 degrees of freedom);
2. Holm's step-down correction over each family of comparisons;
3. "different" where the corrected p is at most `ALPHA`.

Assumption: the t-test takes the per-seed differences as roughly normal,
which a handful of seeds cannot check. So beside each claim the mean and
the min-max of the per-seed differences are printed, with their number:
a reader sees the spread the p rests on.

Edge cases (`paired_t_p`):

- fewer than 2 pairs: p = 1.0, no conclusion (one difference has no
  spread to test it against);
- every difference equal (zero spread): p = 0.0 where they are non-zero
  (every seed agrees exactly), 1.0 where they are all 0 (no difference at
  any seed). p = 0.0 is the t-test's limit as the spread goes to 0, so
  differences equal to the last bit and differences equal to within
  rounding (t in the millions, p ~ 0) are decided alike.

Pure Python but for the t distribution (`scipy.stats.t`); no TensorFlow.

Example:

>>> round(paired_t_p([1.0, 2.0, 3.0]), 4)
0.0742
>>> paired_t_p([5.0]), paired_t_p([0.5, 0.5]), paired_t_p([0.0, 0.0])
(1.0, 0.0, 1.0)
>>> holm([0.01, 0.04, 0.03])
[0.03, 0.06, 0.06]
"""

import dataclasses
import math

from scipy import stats

ALPHA = 0.05


@dataclasses.dataclass(frozen=True)
class Paired:
    """One comparison: `a - b` over the seeds both have.

    `p` is the paired t-test's (`paired_t_p`); `p_holm` its Holm
    correction within the comparison's family (`decide`), `None` until
    then.
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


def paired_t_p(differences):
    """Two-sided p of Student's t on `differences` (mean 0 under the null,
    n - 1 degrees of freedom); the edge cases of the module docstring for
    fewer than 2 differences or zero spread."""
    n = len(differences)
    if n < 2:
        return 1.0
    mean = math.fsum(differences) / n
    variance = math.fsum((d - mean) ** 2 for d in differences) / (n - 1)
    if min(differences) == max(differences) or variance == 0.0:
        return 0.0 if mean != 0.0 else 1.0
    t = mean / math.sqrt(variance / n)
    return float(2.0 * stats.t.sf(abs(t), n - 1))


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
        p=paired_t_p(differences),
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
