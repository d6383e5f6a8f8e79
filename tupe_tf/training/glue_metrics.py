"""GLUE metrics: Matthews correlation, Pearson/Spearman, accuracy, F1.

Which metrics a task reports, and which one picks the best learning rate,
are in its `data_pipeline.glue.GLUE_TASKS` entry.
"""

import numpy as np

from data_pipeline import glue


def accuracy(labels, predictions):
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    return float(np.mean(labels == predictions))


def f1(labels, predictions):
    """Binary F1 of the positive class (1)."""
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    true_positive = np.sum((predictions == 1) & (labels == 1))
    precision_denominator = np.sum(predictions == 1)
    recall_denominator = np.sum(labels == 1)
    if true_positive == 0:
        return 0.0
    precision = true_positive / precision_denominator
    recall = true_positive / recall_denominator
    return float(2 * precision * recall / (precision + recall))


def matthews_corrcoef(labels, predictions):
    """Binary Matthews correlation; 0 when a marginal is constant."""
    labels = np.asarray(labels).astype(bool)
    predictions = np.asarray(predictions).astype(bool)
    tp = float(np.sum(labels & predictions))
    tn = float(np.sum(~labels & ~predictions))
    fp = float(np.sum(~labels & predictions))
    fn = float(np.sum(labels & ~predictions))
    denominator = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    if denominator == 0:
        return 0.0
    return float((tp * tn - fp * fn) / denominator)


def pearson(labels, predictions):
    labels = np.asarray(labels, np.float64)
    predictions = np.asarray(predictions, np.float64)
    if labels.std() == 0 or predictions.std() == 0:
        return 0.0
    return float(np.corrcoef(labels, predictions)[0, 1])


def _average_ranks(values):
    # Ties get the mean of their ranks, as in scipy.stats.rankdata.
    values = np.asarray(values, np.float64)
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values), np.float64)
    sorted_values = values[order]
    start = 0
    while start < len(values):
        end = start
        while (
            end + 1 < len(values)
            and sorted_values[end + 1] == sorted_values[start]
        ):
            end += 1
        ranks[order[start : end + 1]] = 0.5 * (start + end) + 1.0
        start = end + 1
    return ranks


def spearman(labels, predictions):
    return pearson(_average_ranks(labels), _average_ranks(predictions))


_FUNCTIONS = {
    "accuracy": accuracy,
    "f1": f1,
    "matthews_corrcoef": matthews_corrcoef,
    "pearson": pearson,
    "spearman": spearman,
}


def compute_glue_metrics(task, labels, outputs):
    """The task's GLUE metrics from labels and model outputs.

    Args:
        task: GLUE task name.
        labels: class ids, or scores for `stsb`.
        outputs: logits `[n, num_classes]`, or scores `[n]`/`[n, 1]` for
            `stsb`.

    Returns:
        A dict of metric name to float.

    Example:

    >>> compute_glue_metrics("mrpc", [1, 0, 1], [[0, 1], [1, 0], [1, 0]])
    {'accuracy': 0.666..., 'f1': 0.666...}
    """
    glue_task = glue.get_task(task)
    outputs = np.asarray(outputs)
    if glue_task.is_regression:
        predictions = outputs.reshape(-1)
    else:
        predictions = np.argmax(outputs, axis=-1)
    return {
        name: _FUNCTIONS[name](labels, predictions)
        for name in glue_task.metrics
    }


def primary_metric(task):
    """The metric of GLUE task `task` that picks the best learning rate."""
    return glue.get_task(task).primary_metric
