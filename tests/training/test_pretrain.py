"""`run_pretraining` in-process: outputs, TensorBoard scalars, bad input, NaN."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from tests.training.conftest import pretrain_config
from tupe_tf.training import run_pretraining
from tupe_tf.training.callbacks import NonFiniteLossError


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
        ValueError,
        match=r"--seq_length=32 is above the model's max_sequence_length=16",
    ):
        run_pretraining(config)
    assert not (tmp_path / "model" / "checkpoints").exists()


def test_shards_from_another_vocabulary_are_refused(
    tmp_path, shards, other_vocab_file
):
    config = pretrain_config(tmp_path / "model", shards, other_vocab_file)
    with pytest.raises(
        ValueError,
        match=r"--train_files were not built with --vocab_file=.*other_vocab\.txt",
    ):
        run_pretraining(config)
    assert not (tmp_path / "model" / "checkpoints").exists()


def test_unwritable_model_dir_is_refused(tmp_path, shards, vocab_file):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    config = pretrain_config(blocker / "model", shards, vocab_file)
    with pytest.raises(
        ValueError, match=r"--model_dir=.*a_file/model' is not writable"
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
        ValueError, match=r"--train_files: pattern .*none-\*' matches no file"
    ):
        run_pretraining(config)
    config = pretrain_config(tmp_path / "m", shards, vocab_file, eval_every=-1)
    with pytest.raises(ValueError, match=r"--eval_every=-1 must be >= 0"):
        run_pretraining(config)


def test_nan_loss_stops_training_and_keeps_the_last_good_checkpoint(
    tmp_path, shards, vocab_file
):
    model_dir = tmp_path / "model"
    run_pretraining(
        pretrain_config(
            model_dir, shards, vocab_file, num_train_steps=3, save_every=3
        )
    )
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
