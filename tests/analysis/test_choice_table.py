"""The choice table and its lines, on small hand-written records, checked
against a recomputation with NumPy and SciPy (not the study's helpers)."""

import json
import shutil

import numpy as np
import pytest
from scipy import stats

from tests.analysis.fake_records import pretraining_record
from tests.analysis.test_docs import BLOCKS
from tests.analysis.test_docs import ROOT
from tests.analysis.test_docs import problems
from tupe_tf.analysis import choice_lines
from tupe_tf.analysis import choice_table
from tupe_tf.analysis.compare import CompareConfig
from tupe_tf.analysis.study_findings import Findings

SEEDS = range(4)
# Per seed: small noise, so the paired differences have a spread.
NOISE = [0.01, -0.02, 0.0, 0.02]
# Copy accuracy at L = 32 per seed: rope, kerple-log and bert clearly
# above nope (by 0.8, 0.6 and 0.4, up to noise), alibi equal to nope at
# every seed; at 2L = 64 every variant 0.05, but bert, not applicable.
COPY = {
    "nope": [0.1 + e for e in NOISE],
    "rope": [0.9 + e / 2 for e in NOISE],
    "kerple-log": [0.7 - e / 2 for e in NOISE],
    "alibi": [0.1 + e for e in NOISE],
    "bert": [0.5] * len(NOISE),
}
# Final validation loss per seed: rope clearly below nope, alibi not.
LOSS = {
    "nope": [5.8 + e for e in NOISE],
    "rope": [5.0 + e / 2 for e in NOISE],
    "alibi": [5.8 - e for e in NOISE],
}


def _probe(task, variant, seed, accuracy, not_applicable=()):
    return {
        "task": task,
        "variant": variant,
        "seed": seed,
        "train_length": 32,
        "chance": {"32": 0.1, "64": 0.05},
        "accuracy": accuracy,
        "not_applicable": {
            n: f"{variant} learns one table row per position: see x"
            for n in not_applicable
        },
    }


def _probes():
    records = []
    for seed in SEEDS:
        for variant, values in COPY.items():
            if variant == "bert":
                accuracy, not_applicable = {"32": values[seed]}, ["64"]
            else:
                accuracy, not_applicable = {"32": values[seed], "64": 0.05}, []
            records.append(
                _probe("copy", variant, seed, accuracy, not_applicable)
            )
            # order: every variant at nope's accuracy, at both lengths.
            records.append(
                _probe("order", variant, seed, {"32": 0.5, "64": 0.5})
            )
    return records


@pytest.fixture(scope="module")
def found(tmp_path_factory):
    """`(findings, probes, columns)` of the hand-written records, the
    probes written under a study's results directory and read back."""
    results = tmp_path_factory.mktemp("results")
    config = CompareConfig(results_dir=str(results))
    for record in _probes():
        path = (
            results
            / config.probe_study
            / "probes"
            / record["task"]
            / f"{record['variant']}_seed{record['seed']}.json"
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record))
    probes = choice_table.load_probe_records(config)
    assert len(probes) == len(_probes())
    pretrain = [
        pretraining_record(variant, seed, values[seed])
        for variant, values in LOSS.items()
        for seed in SEEDS
    ]
    findings = Findings(config, pretrain, [], [], [], list(LOSS), probes)
    return findings, probes, choice_table.columns(findings, probes)


def _column(columns, header):
    (column,) = [c for c in columns if c.header == header]
    return column


def _holm_above(values, reference):
    """`{variant: marked}` by SciPy's paired t-test and Holm by hand."""
    others = [v for v in values if v != reference]
    p = {
        v: stats.ttest_rel(values[v], values[reference]).pvalue for v in others
    }
    # SciPy's p of differences all 0 is NaN: no difference, p = 1.
    p = {v: 1.0 if np.isnan(x) else x for v, x in p.items()}
    adjusted, running = {}, 0.0
    for k, v in enumerate(sorted(others, key=p.get)):
        running = max(running, min(1.0, (len(others) - k) * p[v]))
        adjusted[v] = running
    return {
        v: adjusted[v] <= 0.05
        and np.mean(values[v]) > np.mean(values[reference])
        for v in others
    }


def test_a_cell_is_median_min_max_and_n(found):
    _, _, columns = found
    rope = np.array(COPY["rope"])
    expected = (
        f"{np.median(rope):.2f} [{rope.min():.2f}, {rope.max():.2f}] "
        f"(n {rope.size})"
    )
    assert _column(columns, "copy 32").cells["rope"].startswith(expected)
    loss = np.array(LOSS["alibi"])
    assert _column(columns, "MLM loss at 64").cells["alibi"] == (
        f"{np.median(loss):.3f} [{loss.min():.3f}, {loss.max():.3f}] (n 4)"
    )


def test_the_mark_is_where_the_rule_calls_a_variant_better(found):
    _, _, columns = found
    marked = _holm_above(COPY, "nope")
    assert marked == {
        "rope": True,
        "kerple-log": True,
        "alibi": False,
        "bert": True,
    }
    cells = _column(columns, "copy 32").cells
    for variant, above in marked.items():
        assert cells[variant].endswith(" *") == above, variant
    assert not cells["nope"].endswith("*")
    # The loss is marked below nope's: the rule on the negated losses.
    below = _holm_above({v: [-x for x in s] for v, s in LOSS.items()}, "nope")
    assert below == {"rope": True, "alibi": False}
    loss = _column(columns, "MLM loss at 64").cells
    assert loss["rope"].endswith(" *") and not loss["alibi"].endswith("*")
    # rope's first evaluated step below nope's: 200 (at 100 all are 6.0).
    assert _column(columns, "below nope from step").cells["rope"] == (
        "200 (n 4)"
    )


def test_a_length_the_records_do_not_score_is_n_a_with_its_reason(found):
    findings, probes, columns = found
    assert _column(columns, "copy 64").cells["bert"] == "n/a (a)"
    assert (
        _column(columns, "copy 32").cells["bert"] == "0.50 [0.50, 0.50] (n 4) *"
    )
    legend = choice_lines.legend(findings, probes)
    assert "n/a (a): the encoding learns one table row per position;" in legend


def test_a_line_names_the_marked_variants_best_median_first(found):
    _, _, columns = found
    lines = choice_lines.use_lines(columns)
    # By median: rope 0.90, kerple-log 0.70, bert 0.50.
    assert (
        "For **alignment (copy)**: at 32, use `rope` (0.90, n 4), `kerple-log` "
        "(0.70, n 4), `bert` (0.50, n 4); at 64, no encoding is above `nope` "
        "by the rule at 4 seeds each." in lines
    )
    rope = np.median(LOSS["rope"])
    assert (
        f"For **the masked-LM loss at 64**: use `rope` ({rope:.3f}, n 4)."
        in lines
    )
    assert (
        "For **local order**: at 32 and at 64, no encoding is above `nope` "
        "by the rule at 4 seeds each." in lines
    )
    # No records of a probe: its columns and line say so.
    assert (
        "For **local distance** and **retrieval at a depth (passkey)**: at "
        "32 and at 64, no score on record." in lines
    )
    summary = choice_lines.summary(columns)
    assert summary.startswith(
        "marks for the masked-LM loss at 64 `rope`; for alignment (copy) at "
        "32 `rope`, `kerple-log` and `bert`; no encoding at 4 seeds each for local "
        "order"
    )


def test_a_changed_probe_record_fails_the_docs_check(tmp_path):
    for doc in BLOCKS:
        (tmp_path / doc).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / doc, tmp_path / doc)
    shutil.copytree(ROOT / "docs" / "results", tmp_path / "docs" / "results")
    record = tmp_path / "docs/results/probes_len32/probes/copy/rope_seed0.json"
    changed = json.loads(record.read_text())
    changed["accuracy"]["32"] = 0.123
    record.write_text(json.dumps(changed))
    assert "docs/results.md: block 'choice' differs from the records" in (
        problems(tmp_path)
    )
