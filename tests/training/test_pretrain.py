"""`run_pretraining` in-process: outputs, TensorBoard scalars, bad input, NaN."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from tests.training.conftest import SEQ_LENGTH
from tests.training.conftest import pretrain_config
from tests.training.conftest import pretrain_in_process
from tupe_tf.training import run_pretraining
from tupe_tf.training.callbacks import NonFiniteLossError
from tupe_tf.utils.errors import UserError


def _scalars(event_dir):
    from tensorboard.backend.event_processing import event_accumulator

    accumulator = event_accumulator.EventAccumulator(
        event_dir, size_guidance={"tensors": 0}
    )
    accumulator.Reload()
    return {
        tag: [
            (event.step, float(tf.make_ndarray(event.tensor_proto)))
            for event in accumulator.Tensors(tag)
        ]
        for tag in accumulator.Tags()["tensors"]
    }


@pytest.mark.large
def test_pretraining_writes_checkpoints_logs_preset_and_results(
    tmp_path, shards, vocab_file
):
    import keras_hub

    import tupe_tf

    config = pretrain_config(
        tmp_path / "model",
        shards,
        vocab_file,
        num_train_steps=6,
        save_every=3,
        eval_every=3,
        steps_per_execution=3,
        jit_compile=None,  # the default: XLA on one device
    )
    result = run_pretraining(config)
    results = json.loads((tmp_path / "model" / "results.json").read_text())
    assert results["global_step"] == 6
    assert results["resumed_from_step"] == 0
    assert (
        np.isfinite(results["eval"]["loss"])
        and 0 <= results["eval"]["mlm_accuracy"] <= 1
    )
    assert len(results["history_this_run"]["loss"]) == 2
    assert len(results["history_this_run"]["val_loss"]) == 2

    checkpoints = tf.train.get_checkpoint_state(
        str(tmp_path / "model" / "checkpoints")
    )
    assert [
        os.path.basename(p) for p in checkpoints.all_model_checkpoint_paths
    ] == [
        "ckpt-3",
        "ckpt-6",
    ]

    train = _scalars(str(tmp_path / "model" / "logs" / "train"))
    for tag in (
        "loss",
        "mlm_accuracy",
        "learning_rate",
        "steps_per_second",
        "sequences_per_second",
    ):
        assert tag in train, tag
    # steps_per_execution=3: callbacks see steps 3 and 6, logged on the global step.
    assert [step for step, _ in train["learning_rate"]] == [3, 6]
    # Warm-up 2 then linear decay to 0 at step 6: lr(3) = 1e-3 * 3/4.
    assert train["learning_rate"][0][1] == pytest.approx(7.5e-4)
    evaluation = _scalars(str(tmp_path / "model" / "logs" / "eval"))
    assert {step for step, _ in evaluation["loss"]} == {3, 6}

    preset = results["preset_dir"]
    backbone = tupe_tf.TupeBackbone.from_preset(preset)
    assert backbone.get_config()["position_encoding"] == "tupe-r"
    for restored, trained in zip(
        backbone.weights, result.model.backbone.weights
    ):
        np.testing.assert_array_equal(restored.numpy(), trained.numpy())
    tokenizer = tupe_tf.TupeTokenizer.from_preset(preset)
    assert tokenizer.vocabulary_size() == sum(
        1 for line in open(vocab_file) if line.strip()
    )
    classifier = keras_hub.models.TextClassifier.from_preset(
        preset,
        num_classes=2,
        preprocessor=tupe_tf.TupeTextClassifierPreprocessor.from_preset(
            preset, sequence_length=32
        ),
    )
    assert classifier.predict(["the history of the city"], verbose=0).shape == (
        1,
        2,
    )
    assert not [
        p for p in os.listdir(tmp_path / "model") if p.startswith(".preset")
    ]


def test_seq_length_above_max_sequence_length_is_refused(
    tmp_path, shards, vocab_file
):
    config = pretrain_config(
        tmp_path / "model", shards, vocab_file, max_sequence_length=16
    )
    with pytest.raises(
        UserError,
        match=r"--seq_length=32 is above the model's max_sequence_length=16",
    ):
        run_pretraining(config)
    assert not (tmp_path / "model" / "checkpoints").exists()


def test_shards_from_another_vocabulary_are_refused(
    tmp_path, shards, other_vocab_file
):
    config = pretrain_config(tmp_path / "model", shards, other_vocab_file)
    with pytest.raises(
        UserError,
        match=r"--train_files were not built with --vocab_file=.*other_vocab\.txt",
    ):
        run_pretraining(config)
    assert not (tmp_path / "model" / "checkpoints").exists()


def test_shards_of_longer_sequences_are_refused(tmp_path, shards, vocab_file):
    half = SEQ_LENGTH // 2
    config = pretrain_config(
        tmp_path / "model", shards, vocab_file, seq_length=half
    )
    with pytest.raises(
        UserError,
        match=rf"--train_files hold sequences of length {SEQ_LENGTH}, longer "
        rf"than --seq_length={half}\. Rebuild the shards with "
        rf"--max_seq_length={half} or pass --seq_length={SEQ_LENGTH}\.",
    ):
        run_pretraining(config)
    assert not (tmp_path / "model" / "checkpoints").exists()


def test_unwritable_model_dir_is_refused(tmp_path, shards, vocab_file):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    config = pretrain_config(blocker / "model", shards, vocab_file)
    with pytest.raises(
        UserError, match=r"--model_dir=.*a_file/model' is not writable"
    ):
        run_pretraining(config)


def test_missing_shards_and_bad_eval_interval_are_refused(
    tmp_path, shards, vocab_file
):
    config = pretrain_config(
        tmp_path / "m",
        shards,
        vocab_file,
        train_files=[str(tmp_path / "none-*")],
    )
    with pytest.raises(
        UserError, match=r"--train_files: pattern .*none-\*' matches no file"
    ):
        run_pretraining(config)
    config = pretrain_config(tmp_path / "m", shards, vocab_file, eval_every=-1)
    with pytest.raises(
        UserError, match=r"--eval_every=-1 is out of range: it must be >= 0"
    ):
        run_pretraining(config)


@pytest.mark.large
def test_nan_loss_stops_training_and_keeps_the_last_good_checkpoint(
    tmp_path, shards, vocab_file
):
    model_dir = tmp_path / "model"
    pretrain_in_process(model_dir, shards, vocab_file, 3)
    # Same run extended with an absurd learning rate: weights overflow to inf.
    config = pretrain_config(
        model_dir,
        shards,
        vocab_file,
        num_train_steps=12,
        save_every=3,
        learning_rate=1e30,
    )
    with pytest.raises(
        NonFiniteLossError,
        match=r"Training loss became (nan|inf) at step \d+; stopped\. The last good checkpoint is kept: .*ckpt-3",
    ):
        run_pretraining(config)
    latest = tf.train.latest_checkpoint(str(model_dir / "checkpoints"))
    assert latest.endswith("ckpt-3")
    reader = tf.train.load_checkpoint(latest)
    for name, _ in tf.train.list_variables(latest):
        value = reader.get_tensor(name)
        if isinstance(value, np.ndarray) and value.dtype.kind == "f":
            assert np.all(np.isfinite(value)), name
    # The preset and results of the good 3-step run are untouched.
    assert (
        json.loads((model_dir / "results.json").read_text())["global_step"] == 3
    )


@pytest.mark.large
def test_mixed_float16_trains_checkpoints_and_resumes(
    tmp_path, shards, vocab_file
):
    """mixed_float16 wraps AdamW in a LossScaleOptimizer; its state (and the
    loss scale) must checkpoint and restore like the float32 path."""
    model_dir = tmp_path / "model"
    first = run_pretraining(
        pretrain_config(
            model_dir,
            shards,
            vocab_file,
            num_train_steps=3,
            save_every=3,
            mixed_precision="mixed_float16",
        )
    )
    assert type(first.model.optimizer).__name__ == "LossScaleOptimizer"
    assert first.model.backbone.compute_dtype == "float16"
    second = run_pretraining(
        pretrain_config(
            model_dir,
            shards,
            vocab_file,
            num_train_steps=6,
            save_every=3,
            mixed_precision="mixed_float16",
        )
    )
    assert second.results["resumed_from_step"] == 3
    assert second.results["global_step"] == 6
    assert np.isfinite(second.results["eval"]["loss"])
    import keras

    import tupe_tf

    preset_backbone = tupe_tf.TupeBackbone.from_preset(
        second.results["preset_dir"]
    )
    assert preset_backbone.compute_dtype == "float32"
    for restored, trained in zip(
        preset_backbone.weights, second.model.backbone.weights
    ):
        np.testing.assert_array_equal(restored.numpy(), trained.numpy())

    assert keras.config.dtype_policy().name == "float32"  # restored afterwards


# The named steps of `run_pretraining`, each on its own.


def test_resolve_default_data_fills_only_missing_shards(monkeypatch, tmp_path):
    from data_pipeline import default_data
    from tupe_tf.training import config as config_lib
    from tupe_tf.training import pretrain_data

    calls = []

    def fake_prepare(work_dir, seq_length, vocab_file=None):
        calls.append((work_dir, seq_length, vocab_file))
        return default_data.DefaultData(
            vocab_file="v.txt",
            shard_dir="d",
            train_files=["d/0", "d/1"],
            eval_files=["d/2"],
        )

    monkeypatch.setattr(default_data, "prepare_default_data", fake_prepare)
    given = config_lib.PretrainConfig(work_dir=str(tmp_path), seq_length=64)
    resolved = pretrain_data.resolve_default_data(given)
    assert calls == [(str(tmp_path), 64, None)]
    assert (resolved.train_files, resolved.eval_files) == (
        ["d/0", "d/1"],
        ["d/2"],
    )
    assert resolved.vocab_file == "v.txt"
    assert given.train_files == ()  # the caller's config is left alone
    named = config_lib.PretrainConfig(train_files=["x"], vocab_file="v")
    assert pretrain_data.resolve_default_data(named) is named
    assert len(calls) == 1
    # A --vocab_file without --train_files tokenizes the default shards.
    mine = tmp_path / "mine.txt"
    mine.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n")
    with_vocab = config_lib.PretrainConfig(
        work_dir=str(tmp_path), seq_length=64, vocab_file=str(mine)
    )
    pretrain_data.resolve_default_data(with_vocab)
    assert calls[-1] == (str(tmp_path), 64, str(mine))


@pytest.mark.parametrize(
    "step, total, every, expected",
    [
        (0, 6, 3, [(3, 2)]),
        (0, 7, 3, [(3, 2), (1, 1)]),
        (4, 9, 3, [(2, 1), (3, 1)]),  # resumed mid-epoch
        (5, 6, 3, [(1, 1)]),
        (6, 6, 3, []),
    ],
)
def test_fit_segments_end_epochs_on_checkpoint_boundaries(
    step, total, every, expected
):
    from tupe_tf.training import pretrain

    segments = pretrain._fit_segments(step, total, every)
    assert segments == expected
    assert step + sum(n * k for n, k in segments) == total


@pytest.mark.parametrize(
    "eval_every, save_every, expected", [(0, 3, 0), (6, 3, 2), (7, 3, 3)]
)
def test_eval_interval_rounds_up_to_checkpoints(
    eval_every, save_every, expected
):
    from tupe_tf.training import config as config_lib
    from tupe_tf.training import pretrain

    config = config_lib.PretrainConfig(
        eval_every=eval_every, save_every=save_every
    )
    assert pretrain.eval_interval_epochs(config) == expected


def test_with_perplexity_caps_the_loss():
    from tupe_tf.training import pretrain

    assert pretrain.with_perplexity({"loss": np.float32(2.0)}) == {
        "loss": 2.0,
        "perplexity": pytest.approx(np.exp(2.0)),
    }
    assert pretrain.with_perplexity({"loss": 1e4})["perplexity"] == (
        pytest.approx(np.exp(50.0))
    )
    assert pretrain.with_perplexity({"mlm_accuracy": 0.5}) == {
        "mlm_accuracy": 0.5
    }


def test_float32_model_copies_mixed_precision_weights(
    tmp_path, shards, vocab_file
):
    import keras

    from tupe_tf.training import pretrain_model

    config = pretrain_config(
        tmp_path, shards, vocab_file, mixed_precision="mixed_bfloat16"
    )
    previous = keras.config.dtype_policy()
    try:
        keras.config.set_dtype_policy("mixed_bfloat16")
        model = pretrain_model.build_masked_lm(config, 50)
        model(pretrain_model.dummy_batch(config), training=False)
        copy = pretrain_model.float32_model(model, config, 50)
        assert copy is not model
        assert copy.backbone.compute_dtype == "float32"
        for a, b in zip(model.get_weights(), copy.get_weights()):
            np.testing.assert_array_equal(a, b)
    finally:
        keras.config.set_dtype_policy(previous)
    float32 = pretrain_config(tmp_path, shards, vocab_file)
    assert pretrain_model.float32_model(model, float32, 50) is model


def test_compile_masked_lm_without_a_rate_uses_the_size_default():
    # A library caller (benchmarks/train_throughput.py) compiles without
    # going through run_pretraining: the default rate must still apply.
    from tupe_tf.training import config as config_lib
    from tupe_tf.training import pretrain_model

    config = config_lib.PretrainConfig(
        seq_length=16,
        global_batch_size=2,
        num_train_steps=100,
        model=config_lib.ModelConfig(
            num_layers=1, num_heads=2, hidden_dim=32, intermediate_dim=64
        ),
        optimizer=config_lib.OptimizerConfig(warmup_ratio=0.0),
    )
    assert config.optimizer.learning_rate is None
    model = pretrain_model.compile_masked_lm(
        pretrain_model.build_masked_lm(config, 50), config
    )
    # No warm-up: the rate at step 0 is the peak.
    assert float(model.optimizer.learning_rate) == pytest.approx(1e-3)


@pytest.mark.large
def test_a_one_step_warm_up_leaves_the_initial_weights(
    tmp_path, shards, vocab_file
):
    """The study's untrained control: the first step of a warm-up has
    learning rate 0, so whatever the peak rate, the weights stay the
    initial ones (AdamW's update and weight decay are both scaled by it)."""
    import tupe_tf

    weights = []
    for peak in (1e-3, 5.0):
        result = run_pretraining(
            pretrain_config(
                tmp_path / f"peak{peak}",
                shards,
                vocab_file,
                num_train_steps=1,
                save_every=1,
                eval_every=0,
                learning_rate=peak,
                warmup_steps=1,
            )
        )
        backbone = tupe_tf.TupeBackbone.from_preset(
            result.results["preset_dir"]
        )
        weights.append(backbone.get_weights())
    assert len(weights[0]) == len(weights[1])
    for first, second in zip(*weights):
        np.testing.assert_array_equal(first, second)
