"""The position probes: generators, shared starts, records, the script."""

import os
import subprocess
import sys

import numpy as np
import pytest

from tupe_tf.analysis import probe_model
from tupe_tf.analysis import probe_report
from tupe_tf.analysis import probe_runner
from tupe_tf.analysis import probe_tasks
from tupe_tf.analysis.probe_config import ProbeConfig
from tupe_tf.analysis.probe_tasks import make_examples
from tupe_tf.utils.errors import UserError

TEXT = probe_tasks.probe_text_for_tests()
LENGTHS = (32, 64, 256)


def _examples(task, length=32, num=64, seed=0, split="heldout", **options):
    return make_examples(task, TEXT, length, num, seed, split, **options)


def _real_lengths(examples):
    return examples.inputs["padding_mask"].sum(axis=1)


def _positions(examples, token):
    """`[num]` position of `token` in each row (exactly one there)."""
    hits = examples.inputs["token_ids"] == TEXT.id_of(token)
    assert (hits.sum(axis=1) == 1).all()
    return hits.argmax(axis=1)


@pytest.mark.parametrize("task", probe_tasks.TASKS)
def test_examples_are_a_function_of_seed_split_and_length(task):
    first, again = _examples(task, seed=3), _examples(task, seed=3)
    for name, values in first.inputs.items():
        np.testing.assert_array_equal(values, again.inputs[name])
    np.testing.assert_array_equal(first.labels, again.labels)
    for other in (_examples(task, seed=4), _examples(task, split="train")):
        differs = any(
            not np.array_equal(values, other.inputs[name])
            for name, values in first.inputs.items()
        )
        assert differs or not np.array_equal(first.labels, other.labels)


@pytest.mark.parametrize("task", probe_tasks.TASKS)
@pytest.mark.parametrize("length", LENGTHS)
def test_examples_are_framed_and_between_half_and_full_length(task, length):
    examples = _examples(task, length)
    ids, mask = examples.inputs["token_ids"], examples.inputs["padding_mask"]
    real = _real_lengths(examples)
    assert ids.shape == (64, length)
    assert real.min() > length // 2 and real.max() <= length
    rows = np.arange(len(ids))
    assert (ids[:, 0] == TEXT.id_of("[CLS]")).all()
    assert (ids[rows, real - 1] == TEXT.id_of("[SEP]")).all()
    assert (ids[mask == 0] == 0).all()


@pytest.mark.parametrize("length", LENGTHS)
def test_copy_masked_targets_are_the_source_span(length):
    examples = _examples("copy", length)
    ids = examples.inputs["token_ids"]
    pool = TEXT.copy_pool(probe_tasks.COPY_POOL_SIZE)
    for row, labels, weights, positions in zip(
        ids,
        examples.labels,
        examples.weights,
        examples.inputs["mask_positions"],
    ):
        m = int(weights.sum())
        np.testing.assert_array_equal(pool[labels[:m]], row[1 : m + 1])
        assert row[m + 1] == TEXT.id_of("[SEP]")
        assert (row[positions[:m]] == TEXT.id_of("[MASK]")).all()
        np.testing.assert_array_equal(positions[:m], m + 2 + np.arange(m))
        assert len(set(labels[:m].tolist())) == m  # distinct tokens
    # Position-blind chance: one right answer per row, pooled.
    spans = examples.weights.sum(axis=1)
    assert examples.chance == pytest.approx(len(spans) / spans.sum())


def _assert_read_at_x(examples):
    """The answer is read at the marker `x` (`A`)."""
    rows = np.arange(len(examples.labels))[:, None]
    read = examples.inputs["token_ids"][rows, examples.inputs["mask_positions"]]
    assert (read == TEXT.id_of("x")).all()
    assert examples.labels.shape == examples.inputs["mask_positions"].shape


@pytest.mark.parametrize("length", LENGTHS)
def test_order_labels_are_which_marker_comes_first(length):
    examples = _examples("order", length, num=200)
    a, b = _positions(examples, "x"), _positions(examples, "y")
    assert (np.abs(a - b) == 1).all()
    np.testing.assert_array_equal(
        examples.labels[:, 0], (a < b).astype("int32")
    )
    _assert_read_at_x(examples)
    assert examples.labels.mean() == 0.5 and examples.chance == 0.5


@pytest.mark.parametrize("length", LENGTHS)
def test_distance_labels_are_the_markers_gap(length):
    k = 4
    examples = _examples("distance", length, num=200, k=k)
    gaps = np.abs(_positions(examples, "x") - _positions(examples, "y"))
    np.testing.assert_array_equal(
        examples.labels[:, 0], (gaps <= k).astype("int32")
    )
    _assert_read_at_x(examples)
    assert gaps.min() >= 1 and gaps.max() <= 3 * k
    assert examples.labels.mean() == 0.5 and examples.chance == 0.5


@pytest.mark.parametrize("task", ["order", "distance"])
def test_binary_probes_show_both_labels_the_same_bag(task):
    examples = _examples(task, num=400)
    real = _real_lengths(examples)
    for length in np.unique(real):
        rows = examples.inputs["token_ids"][real == length]
        bags = {tuple(sorted(row)) for row in rows}
        assert len(bags) == 1


@pytest.mark.parametrize("length", LENGTHS)
def test_passkey_labels_are_the_digits_after_the_phrase(length):
    examples = _examples("passkey", length)
    digit = {TEXT.id_of(str(d)): d for d in range(10)}
    prefix = [TEXT.id_of(t) for t in probe_tasks.PASSKEY_PREFIX]
    for row, labels, positions in zip(
        examples.inputs["token_ids"],
        examples.labels,
        examples.inputs["mask_positions"],
    ):
        assert (row[positions] == TEXT.id_of("[MASK]")).all()
        size = len(prefix) + probe_tasks.KEY_DIGITS
        keys = [
            [digit[t] for t in row[i + len(prefix) : i + size]]
            for i in range(len(row) - size)
            if list(row[i : i + len(prefix)]) == prefix
            and all(t in digit for t in row[i + len(prefix) : i + size])
        ]
        assert keys == [labels.tolist()]
        # The key's are the only digit tokens.
        assert sum(t in digit for t in row) == probe_tasks.KEY_DIGITS
    best = [np.bincount(key).max() for key in examples.labels]
    assert examples.chance == pytest.approx(np.sum(best) / examples.labels.size)


def test_bag_ceiling_counts_the_most_frequent_label_of_each_row():
    labels = np.array([[3, 3, 1, 7], [0, 1, 2, 2]])
    weights = np.array([[1, 1, 1, 0], [1, 1, 1, 1]])
    assert probe_tasks.bag_ceiling(labels, weights) == pytest.approx(4 / 7)


def test_leak_check_flags_a_position_blind_model_above_chance():
    chance = {"32": 0.5, "64": 0.5}
    check = probe_runner.leak_check({"32": 0.52, "64": 0.7}, chance, 1024)
    assert check["above_threshold"] == ["64"]
    assert check["threshold"]["32"] == pytest.approx(0.5 + 3 * 0.5 / 32)


TINY = dict(
    num_layers=1,
    num_heads=2,
    hidden_dim=16,
    intermediate_dim=32,
    dropout=0.0,
    max_sequence_length=64,
    vocabulary_size=TEXT.vocabulary_size,
)


@pytest.mark.parametrize("task", probe_tasks.TASKS)
def test_one_seed_shares_initial_weights_and_examples_across_variants(task):
    # bert draws its position table from the random stream before the
    # encoder's weights, rope draws nothing: the shared weights must still
    # start equal (from the nope model of the seed); the examples and their
    # order are a function of (task, seed, split, length) only, and
    # `train_probe` feeds them unshuffled.
    bert, shared = probe_model.shared_start(
        task, 7, TINY, {"position_encoding": "bert"}, 64
    )
    rope, _ = probe_model.shared_start(
        task, 7, TINY, {"position_encoding": "rope"}, 64
    )
    other_seed, _ = probe_model.shared_start(
        task, 8, TINY, {"position_encoding": "rope"}, 64
    )
    rope_values = {v.path: v.numpy() for v in rope.weights}
    other_values = {v.path: v.numpy() for v in other_seed.weights}
    assert set(shared) == set(rope_values)  # rope has no weights of its own
    assert any("head" in path for path in shared)
    for variable in bert.weights:
        if variable.path in rope_values:
            np.testing.assert_array_equal(
                variable.numpy(), rope_values[variable.path]
            )
    kernel = "transformer_layer_0/self_attention_layer/query/kernel"
    assert not np.array_equal(rope_values[kernel], other_values[kernel])


def test_training_feeds_the_examples_in_their_order():
    calls = {}

    class Recorder:
        weights = trainable_variables = ()

        def compile(self, **kwargs):
            calls["compile"] = kwargs

        def fit(self, *args, **kwargs):
            calls["fit"] = kwargs
            return type("History", (), {"history": {"loss": [0.5]}})()

    examples = _examples("distance", num=8)
    probe_model.train_probe(Recorder(), examples, 4, ProbeConfig().optimizer)
    assert calls["fit"]["shuffle"] is False
    assert calls["fit"]["epochs"] == 1


def test_nope_predicts_the_same_token_at_every_mask_of_a_row():
    # Without positions the masks are indistinguishable, whatever the
    # weights: nope's copy accuracy is at most the position-blind chance.
    model, _ = probe_model.shared_start(
        "copy", 0, TINY, {"position_encoding": "nope"}, 64
    )
    examples = _examples("copy", 64, num=16, pool_size=64)
    predicted = np.asarray(
        probe_model.prediction_function(model)(examples.inputs)
    )
    for row, weights in zip(predicted, examples.weights):
        assert len(set(row[weights > 0].tolist())) == 1
    accuracy, _ = probe_model.accuracies(
        probe_model.prediction_function(model), examples
    )
    assert accuracy <= examples.chance + 1e-9


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(variants=("bert", "no-such")), "--variants has unknown"),
        (dict(tasks=("copy", "sort")), "--tasks has unknown"),
        (dict(distance_k=5), "--distance_k=5 is too large"),
        (dict(copy_pool_size=100), "--copy_pool_size=100 is smaller"),
        (dict(length_factors=(4, 2)), "--length_factors must be increasing"),
        (dict(seeds=()), "--seeds must not be empty"),
    ],
)
def test_config_refuses_settings_that_cannot_run(changes, message):
    with pytest.raises(UserError, match=message):
        ProbeConfig(**changes).validate()


def test_records_of_other_settings_are_not_mixed(tmp_path):
    config = ProbeConfig(results_dir=str(tmp_path))
    probe_runner.check_study(config, "data-a")
    probe_runner.check_study(config, "data-a")
    with pytest.raises(UserError, match="num_train_steps"):
        probe_runner.check_study(config.replace(num_train_steps=7), "data-a")
    with pytest.raises(UserError, match="the data"):
        probe_runner.check_study(config, "data-b")


def _record(variant, seed, accuracy, task="copy"):
    return {
        "task": task,
        "variant": variant,
        "seed": seed,
        "chance": {"32": 0.1, "64": 0.05},
        "accuracy": accuracy,
    }


def test_tables_show_median_and_range_over_seeds():
    records = [
        _record("bert", seed, {"32": accuracy})
        for seed, accuracy in enumerate([0.5, 0.75, 1.0])
    ]
    table = probe_report.tables(records)
    assert "| bert | 0.75 [0.50, 1.00] (n 3) | n/a |" in table
    assert "| chance | 0.10 | 0.05 |" in table


def test_uses_positions_is_the_paired_gap_to_nope_by_the_rule():
    # rope is 0.8 above nope at every seed, up to noise of its own;
    # alibi's gaps change sign, so the rule cannot put it above nope.
    noise = [0.01, -0.02, 0.0, 0.02, -0.01]
    records = []
    for seed, e in enumerate(noise):
        records.append(_record("nope", seed, {"32": 0.1 + e, "64": 0.05}))
        records.append(
            _record("rope", seed, {"32": 0.9 + e / 2, "64": 0.5 + e / 2})
        )
        records.append(_record("alibi", seed, {"32": 0.1 - 2 * e}))
    gaps = probe_report.gaps_to_nope(records, 32)
    assert gaps["rope"].mean == pytest.approx(0.8)
    assert probe_report.uses_positions(gaps["rope"])
    assert not probe_report.uses_positions(gaps["alibi"])
    table = probe_report.tables(records)
    assert (
        "| rope | 0.90 [0.89, 0.91] (n 5) * | 0.50 [0.49, 0.51] (n 5) * |"
        in (table)
    )
    assert "| alibi | 0.10 [0.06, 0.14] (n 5) | n/a |" in table
    assert (
        "| nope | 0.10 [0.08, 0.12] (n 5) | 0.05 [0.05, 0.05] (n 5) |" in table
    )
    finding = probe_report.findings(records)
    assert finding.startswith(
        "- **copy**: at 32, 1 of 2 above nope (rope +0.80"
    )
    assert "at 64, 1 of 1 above nope (rope +0.45" in finding


def test_without_nope_records_nothing_is_called_above_it():
    records = [_record("rope", seed, {"32": 0.9}) for seed in range(5)]
    assert probe_report.gaps_to_nope(records, 32) == {}
    assert "*" not in probe_report.tables(records)


def _tiny_config(tmp_path, **changes):
    settings = dict(
        results_dir=str(tmp_path / "results"),
        work_dir=str(tmp_path.parent / "probe_data"),
        variants=("rope", "bert", "nope"),
        seeds=(0,),
        length_factors=(2,),
        num_layers=1,
        num_heads=2,
        hidden_dim=16,
        intermediate_dim=32,
        num_train_steps=3,
        batch_size=4,
        eval_examples=16,
        copy_pool_size=64,
    )
    return ProbeConfig(**{**settings, **changes})


@pytest.mark.large
def test_probe_suite_end_to_end_resumes_without_rerunning(tmp_path):
    # A mask task and a [CLS] task (the other two share their heads and
    # record layout; their examples are tested above).
    config = _tiny_config(tmp_path, tasks=("passkey", "distance"))
    first = probe_runner.run_probes(config.replace(max_runs=2))
    assert first["new_runs"] == 2 and first["planned_runs"] == 6
    result = probe_runner.run_probes(config)
    assert result["new_runs"] == 4 and result["finished_runs"] == 6
    records = {(r["task"], r["variant"]): r for r in result["records"]}
    for task in config.tasks:
        rope, bert = records[task, "rope"], records[task, "bert"]
        assert set(rope["chance"]) == {"32", "64"}
        assert set(rope["accuracy"]) == {"32", "64"}
        assert set(rope["rope_scaled_accuracy"]) == {"linear", "ntk", "yarn"}
        assert set(bert["accuracy"]) == {"32"}
        assert "untrained" in bert["not_applicable"]["64"]
        assert set(bert["untrained_rows_accuracy"]) == {"64"}
        assert set(bert["refilled_accuracy"]) == {"64"}
        nope = records[task, "nope"]
        assert nope["leak_check"]["above_threshold"] == []
        assert ("key_accuracy" in rope) == (task == "passkey")
        for record in (rope, bert, nope):
            assert record["seed"] == 0 and record["wall_seconds"] > 0
            assert record["train"]["num_train_steps"] == 3
    path = config.record_path("passkey", "rope", 0)
    assert path.endswith("probes_len32/probes/passkey/rope_seed0.json")
    mtimes = {
        os.path.join(d, f): os.path.getmtime(os.path.join(d, f))
        for d, _, files in os.walk(config.results_dir)
        for f in files
    }
    again = probe_runner.run_probes(config)
    assert again["new_runs"] == 0
    for path, mtime in mtimes.items():
        assert os.path.getmtime(path) == mtime


@pytest.mark.large
def test_script_refuses_a_bad_flag_with_one_error_line(tmp_path):
    script = os.path.join(os.path.dirname(__file__), "../../scripts/probe.py")
    process = subprocess.run(
        [
            sys.executable,
            script,
            f"--results_dir={tmp_path}",
            "--variants=bert,nope2",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert process.returncode == 2
    lines = process.stderr.splitlines()
    errors = [line for line in lines if line.startswith("ERROR:")]
    assert len(errors) == 1 and "--variants has unknown" in errors[0]
    assert not os.listdir(tmp_path)


COMMITTED = ProbeConfig(
    results_dir=os.path.join(os.path.dirname(__file__), "../../docs/results")
)


@pytest.mark.skipif(
    not os.path.isdir(COMMITTED.study_results_dir),
    reason="no committed probe records",
)
def test_committed_probe_report_matches_its_records():
    records = probe_runner.load_records(COMMITTED)
    path = os.path.join(COMMITTED.study_results_dir, "tables.md")
    with open(path) as f:
        assert f.read() == probe_report.report(records)
    # A record's accuracy moved changes the report: it is read, not kept.
    moved = [
        dict(r, accuracy={k: v / 2 for k, v in r["accuracy"].items()})
        for r in records
    ]
    assert probe_report.report(moved) != probe_report.report(records)
