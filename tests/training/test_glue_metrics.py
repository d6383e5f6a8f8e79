import numpy as np
import pytest

from tupe_tf.training import glue_metrics


def test_matthews_corrcoef_matches_the_formula():
    labels = [1, 1, 1, 0, 0, 0, 1, 0]
    predictions = [1, 0, 1, 0, 1, 0, 1, 0]
    tp, tn, fp, fn = 3, 3, 1, 1
    expected = (tp * tn - fp * fn) / np.sqrt(
        (tp + fp) * (tp + fn) * (tn + fp) * (tn + fn)
    )
    assert glue_metrics.matthews_corrcoef(labels, predictions) == pytest.approx(
        expected
    )
    assert glue_metrics.matthews_corrcoef([1, 0, 1], [1, 1, 1]) == 0.0


def test_f1_and_accuracy():
    labels = [1, 0, 1, 1, 0]
    predictions = [1, 1, 0, 1, 0]
    # precision 2/3, recall 2/3.
    assert glue_metrics.f1(labels, predictions) == pytest.approx(2 / 3)
    assert glue_metrics.accuracy(labels, predictions) == pytest.approx(3 / 5)
    assert glue_metrics.f1([0, 0], [0, 0]) == 0.0


def test_pearson_and_spearman_match_scipy():
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(0)
    labels = np.round(rng.uniform(0, 5, 200), 1)  # ties, as in STS-B
    predictions = labels + rng.normal(0, 1, 200)
    predictions[:20] = 2.0  # ties in predictions too
    assert glue_metrics.pearson(labels, predictions) == pytest.approx(
        stats.pearsonr(labels, predictions)[0], abs=1e-10
    )
    assert glue_metrics.spearman(labels, predictions) == pytest.approx(
        stats.spearmanr(labels, predictions)[0], abs=1e-10
    )


def test_compute_glue_metrics_per_task():
    logits = np.array([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7]])
    assert set(
        glue_metrics.compute_glue_metrics("mrpc", [1, 0, 0], logits)
    ) == {"accuracy", "f1"}
    assert set(glue_metrics.compute_glue_metrics("qqp", [1, 0, 0], logits)) == {
        "accuracy",
        "f1",
    }
    assert set(
        glue_metrics.compute_glue_metrics("cola", [1, 0, 0], logits)
    ) == {"matthews_corrcoef"}
    stsb = glue_metrics.compute_glue_metrics(
        "stsb", [1.0, 2.0, 3.0], [[1.1], [2.5], [2.9]]
    )
    assert set(stsb) == {"pearson", "spearman"}
    assert stsb["spearman"] == pytest.approx(1.0)
    mnli = glue_metrics.compute_glue_metrics(
        "mnli", [2, 0], [[0, 0, 1], [0, 1, 0]]
    )
    assert mnli == {"accuracy": 0.5}
