"""The selection split of GLUE fine-tuning: carved from the training file,
deterministic, stratified, disjoint from the rows trained on, and the only
thing the learning rate is chosen on (no training here)."""

import numpy as np
import pytest

from data_pipeline import glue
from tupe_tf.training.finetune import choose_and_evaluate
from tupe_tf.utils.errors import UserError


def _labels(counts, seed=0):
    """Class ids, `counts[c]` of class `c`, shuffled."""
    labels = np.concatenate([np.full(n, c) for c, n in enumerate(counts)])
    return np.random.default_rng(seed).permutation(labels).astype(np.int32)


def test_the_carve_is_deterministic_stratified_and_disjoint():
    task = glue.get_task("mnli")
    labels = _labels([500, 300, 200])
    fit, selection = glue.selection_indices(task, labels, 0.1)
    again = glue.selection_indices(task, labels, 0.1)
    np.testing.assert_array_equal(fit, again[0])
    np.testing.assert_array_equal(selection, again[1])
    assert not set(fit) & set(selection)
    assert sorted(set(fit) | set(selection)) == list(range(len(labels)))
    # 10% of each class.
    assert np.bincount(labels[selection]).tolist() == [50, 30, 20]
    # Another seed: other rows, the same shares.
    _, other = glue.selection_indices(task, labels, 0.1, seed=1)
    assert set(other) != set(selection)
    assert np.bincount(labels[other]).tolist() == [50, 30, 20]


def test_small_classes_keep_a_row_on_each_side():
    task = glue.get_task("sst2")
    labels = _labels([40, 3])
    fit, selection = glue.selection_indices(task, labels, 0.1)
    assert np.bincount(labels[selection]).tolist() == [4, 1]
    assert np.bincount(labels[fit]).tolist() == [36, 2]
    with pytest.raises(UserError, match="--selection_fraction=0.1"):
        glue.selection_indices(task, np.array([0, 1], np.int32), 0.1)


def test_regression_scores_are_stratified_by_quantile_bins():
    task = glue.get_task("stsb")
    scores = np.random.default_rng(0).uniform(0, 5, 1000).astype(np.float32)
    fit, selection = glue.selection_indices(task, scores, 0.1)
    assert len(selection) == 100 and len(fit) == 900
    strata = glue.selection_strata(task, scores)
    assert np.bincount(strata).tolist() == [200] * 5
    assert np.bincount(strata[selection]).tolist() == [20] * 5


def test_carved_splits_keep_sentences_with_their_labels():
    task = glue.get_task("mrpc")
    labels = _labels([30, 20])
    first = [f"first {i} {label}" for i, label in enumerate(labels)]
    second = [f"second {i}" for i in range(len(labels))]
    train = glue.GlueSplit(task, "train", [first, second], labels, "x.tsv")
    fit, selection = glue.carve_selection_split(train, 0.2)
    assert (fit.split, selection.split) == ("train", "selection")
    assert len(fit) + len(selection) == len(train)
    assert not set(fit.sentences[0]) & set(selection.sentences[0])
    for part in (fit, selection):
        for text, pair, label in zip(*part.sentences, part.labels):
            assert text.endswith(f" {label}")
            assert pair == "second " + text.split()[1]


def test_known_evaluation_files_are_named_for_what_they_are():
    def split(task, rows, source="glue/X/dev.tsv"):
        labels = np.zeros(rows, np.int32)
        return glue.GlueSplit(
            glue.get_task(task), "validation", [[""] * rows], labels, source
        )

    assert "SST's test split" in glue.describe_split(split("sst2", 1821))
    assert "out-of-domain" in glue.describe_split(split("cola", 516))
    assert glue.describe_split(split("sst2", 872)).endswith("SST-2 dev split")
    assert glue.describe_split(split("rte", 277)) == "glue/X/dev.tsv"
    # A capped read is not recognised by its size.
    assert glue.describe_split(split("cola", 516), 516) == (
        "glue/X/dev.tsv, its first 516 rows"
    )


def _runs_and_outputs():
    """Two rates x three seeds: the selection split prefers 3e-5; the
    evaluation file's outputs would prefer 2e-5."""
    runs, outputs = [], []
    labels = np.array([0, 1] * 10, np.int32)
    for lr, selection, right in ((2e-5, 0.6, 20), (3e-5, 0.9, 12)):
        for seed in range(3):
            runs.append(
                {
                    "learning_rate": lr,
                    "seed": seed,
                    "selection": {"accuracy": selection + 0.01 * seed},
                }
            )
            predicted = labels.copy()
            predicted[right:] = 1 - predicted[right:]
            outputs.append({"validation": np.eye(2)[predicted]})
    return runs, outputs, labels


def test_the_rate_is_chosen_on_the_selection_split_only():
    runs, outputs, labels = _runs_and_outputs()
    by_lr, chosen, evaluation = choose_and_evaluate(
        "sst2", runs, outputs, {"validation": labels}
    )
    assert chosen == 3e-5
    assert by_lr["3e-05"]["accuracy"] == pytest.approx(0.91)
    assert evaluation == {"validation": {"accuracy": pytest.approx(0.6)}}
    # Only the chosen rate's runs are scored on the evaluation file.
    assert [("evaluation" in r) for r in runs] == [False] * 3 + [True] * 3
    # Other evaluation labels change the scores, never the choice.
    perturbed = np.random.default_rng(0).permutation(labels)
    fresh, _, _ = _runs_and_outputs()
    by_lr_again, chosen_again, evaluation_again = choose_and_evaluate(
        "sst2", fresh, outputs, {"validation": perturbed}
    )
    assert (by_lr_again, chosen_again) == (by_lr, chosen)
    assert evaluation_again != evaluation
