"""Descriptive statistics of the comparison study: spreads over seeds and
curve events. Comparisons between variants follow one rule, in
`paired_stats`.

Pure Python (no TensorFlow), so tables can be rebuilt from the per-run JSON
files anywhere.

Example:

>>> spread([5.1, 5.3, 5.2])
{'median': 5.2, 'low': 5.1, 'high': 5.3, 'n': 3}
>>> first_step_at_or_below([100, 200, 300], [6.0, 5.5, 5.0], 5.5)
200
"""

import math
import statistics


def spread(values):
    """Median and min-max of `values` (None and NaN dropped)."""
    values = [
        float(v) for v in values if v is not None and not math.isnan(float(v))
    ]
    if not values:
        return {"median": None, "low": None, "high": None, "n": 0}
    return {
        "median": float(statistics.median(values)),
        "low": min(values),
        "high": max(values),
        "n": len(values),
    }


def first_step_at_or_below(steps, losses, target):
    """First evaluated step whose loss is <= `target`; None if never."""
    if target is None:
        return None
    for step, loss in zip(steps, losses):
        if loss <= target:
            return int(step)
    return None


def format_spread(s, digits=3, signed=False):
    """`median [low, high]`, or `median` for one value, or `-`; `signed`
    writes every value with its sign (`+0.052`)."""
    if s["median"] is None:
        return "-"
    form = f"{'+' if signed else ''}.{digits}f"
    if s["n"] == 1:
        return format(s["median"], form)
    return f"{s['median']:{form}} [{s['low']:{form}}, {s['high']:{form}}]"


def step_spread(values, budget):
    """Spread of event steps where None (never reached) counts as > budget.

    Returns a dict with `text` (e.g. `1500 [1250, 1750]`, `>3000` parts for
    seeds that never got there) and `reached` (seeds that got there).
    """
    n = len(values)
    reached = sorted(v for v in values if v is not None)
    if not n:
        return {"text": "-", "reached": 0, "n": 0}
    # Never reached sorts above every reached step.
    ordered = reached + [None] * (n - len(reached))
    median = ordered[(n - 1) // 2] if n % 2 else None
    if n % 2 == 0:
        lo, hi = ordered[n // 2 - 1], ordered[n // 2]
        median = None if lo is None or hi is None else (lo + hi) / 2

    def show(v):
        return f">{budget}" if v is None else f"{v:g}"

    if n == 1:
        text = show(ordered[0])
    else:
        text = f"{show(median)} [{show(ordered[0])}, {show(ordered[-1])}]"
    return {"text": text, "reached": len(reached), "n": n}
