"""What runs of one seed share in the study's pre-training: what the paired
comparisons of `paired_stats` stand on (docs/results.md section 4).

The configurations are the ones `study_runner` hands to pre-training
(captured, nothing trains); the models are built as pre-training builds
them (`pretrain_model.build_and_restore`) and the batches read as it reads
them (`pretrain_data.make_dataset`).
"""

import types

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.analysis.micro_study import micro_config
from tupe_tf import training
from tupe_tf.analysis import compare
from tupe_tf.analysis import study_runner
from tupe_tf.analysis.study_config import NO_POSITIONS
from tupe_tf.analysis.study_config import VARIANTS
from tupe_tf.analysis.study_plan import Run
from tupe_tf.training import distribution
from tupe_tf.training import pretrain_data
from tupe_tf.training import pretrain_model
from tupe_tf.training.pretrain import PretrainingRun

VOCABULARY_SIZE = 300


def _run_config(monkeypatch, tmp_path, config, variant, seed, data):
    """The `PretrainConfig` the study pre-trains (`variant`, `seed`) with."""
    captured = []

    def run_pretraining(run_config):
        captured.append(run_config)
        return types.SimpleNamespace(results={})

    monkeypatch.setattr(training, "run_pretraining", run_pretraining)
    study_runner._pretrain(config, Run("pretrain", variant, seed), data)
    (run_config,) = captured
    return run_config


def _initial_weights(run_config):
    """`({path: value}, token initializer config)` of the masked LM
    pre-training starts from."""
    strategy = tf.distribute.get_strategy()
    run = PretrainingRun(
        config=run_config,
        strategy=strategy,
        paths=distribution.worker_paths(run_config, strategy),
        vocabulary=types.SimpleNamespace(size=VOCABULARY_SIZE),
    )
    model, _, step, _ = pretrain_model.build_and_restore(run)
    assert step == 0
    weights = {v.path: np.asarray(v.numpy()) for v in model.weights}
    token = model.backbone.token_embedding.embeddings_initializer.get_config()
    keras.backend.clear_session()
    return weights, token


def _study_data(tmp_path, data=None):
    data = data or {"train": [], "eval": {64: []}, "vocab": "vocab.txt"}
    return types.SimpleNamespace(
        train_files=data["train"],
        eval_files=data["eval"],
        vocab_file=data["vocab"],
    )


def _differing(own, reference, alike):
    """`(shared, own)`: the weights `own` has in common with `reference`
    that start from another value, and the weights `reference` lacks.
    `alike`: whether both draw their token embedding from one
    distribution (else it is not common)."""
    common = {
        path
        for path, value in own.items()
        if path in reference and reference[path].shape == value.shape
    }
    if not alike:
        common.discard("token_embedding/embeddings")
    differing = {p for p in common if not np.array_equal(own[p], reference[p])}
    return differing, set(own) - common - {"token_embedding/embeddings"}


def test_runs_of_one_seed_share_the_initial_value_of_shared_weights(
    monkeypatch, tmp_path
):
    config = compare.CompareConfig(output_dir=str(tmp_path))
    data = _study_data(tmp_path)
    built = {
        variant: _initial_weights(
            _run_config(monkeypatch, tmp_path, config, variant, 0, data)
        )
        for variant in VARIANTS
    }
    reference, reference_token = built[NO_POSITIONS]
    plain = []
    for variant, (weights, token) in built.items():
        alike = token == reference_token
        differing, own = _differing(weights, reference, alike)
        # The token embedding, drawn first, starts from `nope`'s value
        # wherever it is drawn alike.
        assert "token_embedding/embeddings" not in differing, variant
        # Only a variant that draws values of its own (position weights,
        # or the token embedding from another distribution) can shift the
        # seeded stream for the weights drawn after them, so that what it
        # shares with `nope` (the layers' kernels) starts from other
        # values: `bert`, `bert-r` and `kerple-log` do (docs/results.md).
        assert not differing or own or not alike, (variant, differing)
        if not own and alike and variant != NO_POSITIONS:
            plain.append(variant)
    # Variants without weights of their own (`rope`, `alibi`) are on record.
    assert plain
    # Another seed draws other values.
    other, _ = _initial_weights(
        _run_config(monkeypatch, tmp_path, config, NO_POSITIONS, 1, data)
    )
    assert not np.array_equal(
        other["token_embedding/embeddings"],
        reference["token_embedding/embeddings"],
    )


def _batches(run_config, count=3):
    dataset = pretrain_data.make_dataset(
        run_config,
        run_config.train_files,
        run_config.global_batch_size,
        is_training=True,
    )
    return [
        {k: v.numpy() for k, v in batch[0].items()}
        for batch in dataset.take(count)
    ]


@pytest.mark.parametrize("variant", ["bert", "rope"])
def test_runs_of_one_seed_share_the_data_order(
    monkeypatch, tmp_path, tiny_data, variant
):
    config = micro_config(tmp_path, tiny_data)
    data = _study_data(tmp_path, tiny_data)

    def batches(variant, seed):
        return _batches(
            _run_config(monkeypatch, tmp_path, config, variant, seed, data)
        )

    reference = batches(NO_POSITIONS, 0)
    for own, theirs in zip(batches(variant, 0), reference):
        assert own.keys() == theirs.keys()
        for key in own:
            np.testing.assert_array_equal(own[key], theirs[key])
    # The seed, not the variant, sets the order and the masks.
    other = batches(NO_POSITIONS, 1)
    assert any(
        not np.array_equal(a["token_ids"], b["token_ids"])
        for a, b in zip(other, reference)
    )
