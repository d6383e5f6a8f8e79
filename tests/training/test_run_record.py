"""A resume continues the same run (`tupe_tf.training.run_record`).

The settings that decide what data a step sees are recorded with the
checkpoints with the run's config; a resume that changes one, or the
optimizer, is refused naming the flag and the recorded value; the length
and the learning-rate schedule may change; checkpoints without a record
resume as before; a resume past `--num_train_steps` has nothing to train.
"""

import json
import os
import shutil
import types

import pytest
import tensorflow as tf

from tests.training.conftest import PRETRAIN_SCRIPT
from tests.training.conftest import assert_refused
from tests.training.conftest import pretrain_config
from tests.training.conftest import pretrain_flags
from tests.training.conftest import pretrain_in_process
from tests.training.conftest import run_script
from tupe_tf.training import run_record
from tupe_tf.training.pretrain import run_pretraining


def fake_run(model_dir, shards, vocab_file, train=None, **overrides):
    config = pretrain_config(model_dir, shards, vocab_file, **overrides)
    return types.SimpleNamespace(
        config=config, train_files=[train or shards["train"]]
    )


def test_a_new_run_is_recorded_and_the_same_settings_resume(
    tmp_path, shards, vocab_file
):
    run = fake_run(tmp_path, shards, vocab_file)
    run_record.check_or_record(run, resumed=False)
    path = run_record.record_path(run.config)
    with open(path) as f:
        record = json.load(f)
    assert record["global_batch_size"] == 8
    assert record["seq_length"] == 32
    assert record["mask_rate"] == 0.15
    assert len(record[run_record.FINGERPRINT]) == 64
    # The same settings, and a longer run, resume.
    longer = fake_run(tmp_path, shards, vocab_file, num_train_steps=100)
    run_record.check_or_record(longer, resumed=True)
    # Only the chief writes the record.
    os.remove(path)
    run_record.check_or_record(run, resumed=False, chief=False)
    assert not os.path.exists(path)


@pytest.mark.parametrize(
    "overrides, fragments",
    [
        (
            dict(global_batch_size=16),
            [
                "--global_batch_size=16 (the checkpoints were made with 8)",
                "rerun with --global_batch_size=8;",
            ],
        ),
        (
            dict(seq_length=16),
            ["--seq_length=16 (the checkpoints were made with 32)"],
        ),
        (dict(seed=3), ["--seed=3 (the checkpoints were made with 0)"]),
        (
            dict(mask_rate=0.2),
            ["--mask_rate=0.2 (the checkpoints were made with 0.15)"],
        ),
        (
            dict(max_predictions_per_seq=5),
            [
                "--max_predictions_per_seq=5 (the checkpoints were made with None)"
            ],
        ),
        (
            dict(train="eval"),
            [
                "--train_files hold other shards (fingerprint",
                "rerun with the first run's --train_files;",
            ],
        ),
    ],
)
def test_a_resume_with_other_data_settings_is_refused(
    tmp_path, shards, vocab_file, overrides, fragments
):
    run_record.check_or_record(
        fake_run(tmp_path, shards, vocab_file), resumed=False
    )
    if overrides.get("train") == "eval":
        overrides["train"] = shards["eval"]
    changed = fake_run(tmp_path, shards, vocab_file, **overrides)
    with pytest.raises(run_record.ChangedRunError) as refusal:
        run_record.check_or_record(changed, resumed=True)
    message = str(refusal.value)
    for fragment in fragments + [
        "holds checkpoints of a run with other data settings",
        run_record.record_path(changed.config),
        "use a new --model_dir (with --init_from="
        f"{changed.config.model_dir}/preset to start from this run's weights)",
    ]:
        assert fragment in message, message


def test_a_resume_may_change_the_schedule_not_the_optimizer(
    tmp_path, shards, vocab_file
):
    run_record.check_or_record(
        fake_run(tmp_path, shards, vocab_file), resumed=False
    )
    lamb = fake_run(tmp_path, shards, vocab_file, algorithm="lamb")
    with pytest.raises(run_record.ChangedRunError) as refusal:
        run_record.check_or_record(lamb, resumed=True)
    message = str(refusal.value)
    assert (
        "holds checkpoints of a run with another optimizer: --optimizer=lamb "
        "(the checkpoints were made with adamw)" in message
    ), message
    assert "To resume, rerun with --optimizer=adamw;" in message
    longer = fake_run(
        tmp_path,
        shards,
        vocab_file,
        num_train_steps=100,
        learning_rate=5e-4,
        warmup_steps=10,
        save_every=5,
    )
    run_record.check_or_record(longer, resumed=True)
    with open(run_record.record_path(longer.config)) as f:
        record = json.load(f)
    assert record["num_train_steps"] == 100
    assert record["optimizer"]["learning_rate"] == 5e-4


def test_the_start_is_recorded_and_a_resume_may_not_contradict_it(
    tmp_path, shards, vocab_file
):
    start = {"preset": "/presets/phase1", "kind": "tupe-tf"}
    run = fake_run(tmp_path, shards, vocab_file, init_from="/presets/phase1")
    assert run_record.check_or_record(run, False, start=start) == start
    # A resume reports the recorded start, with or without --init_from.
    assert run_record.check_or_record(run, True) == start
    plain = fake_run(tmp_path, shards, vocab_file)
    assert run_record.check_or_record(plain, True) == start
    elsewhere = fake_run(tmp_path, shards, vocab_file, init_from="/other")
    with pytest.raises(run_record.ChangedRunError) as refusal:
        run_record.check_or_record(elsewhere, True)
    assert (
        "holds checkpoints of a run that started from /presets/phase1 "
        "(recorded in" in str(refusal.value)
    )
    assert (
        "would not read --init_from='/other'. To resume, rerun with "
        "--init_from=/presets/phase1; to start a new run from '/other', use "
        "a new --model_dir." in str(refusal.value)
    )
    # A run that started from fresh weights and a resume naming a preset.
    fresh = fake_run(tmp_path / "fresh", shards, vocab_file)
    run_record.check_or_record(fresh, False)
    later = fake_run(tmp_path / "fresh", shards, vocab_file, init_from="/p")
    with pytest.raises(run_record.ChangedRunError, match="from fresh weights"):
        run_record.check_or_record(later, True)


def test_checkpoints_without_a_record_resume(tmp_path, shards, vocab_file):
    run = fake_run(tmp_path, shards, vocab_file, global_batch_size=16)
    run_record.check_or_record(run, resumed=True)
    assert not os.path.exists(run_record.record_path(run.config))


def test_the_fingerprint_follows_the_shards_content_not_their_place(
    tmp_path, shards
):
    copy = str(tmp_path / "copy")
    shutil.copytree(shards["dir"], copy)
    moved = os.path.join(copy, os.path.basename(shards["train"]))
    fingerprint = run_record.shards_fingerprint
    assert fingerprint([shards["train"]]) == fingerprint([moved])
    assert fingerprint([shards["train"]]) != fingerprint([shards["eval"]])
    both = [shards["train"], shards["eval"]]
    assert fingerprint(both) != fingerprint(both[::-1])


@pytest.mark.large
def test_a_resume_with_another_batch_size_is_one_error_line(
    tmp_path, shards, vocab_file, data_flags
):
    model_dir = tmp_path / "model"
    pretrain_in_process(model_dir, shards, vocab_file, 2)
    checkpoints = model_dir / "checkpoints"
    before = sorted(os.listdir(checkpoints))
    assert "run.json" in before
    flags = pretrain_flags(
        data_flags,
        model_dir,
        "--num_train_steps=4",
        "--save_every=2",
        "--global_batch_size=16",
    )
    assert_refused(
        run_script(PRETRAIN_SCRIPT, flags),
        "--global_batch_size=16 (the checkpoints were made with 8)",
        "use a new --model_dir",
    )
    assert sorted(os.listdir(checkpoints)) == before
    assert tf.train.latest_checkpoint(str(checkpoints)).endswith("ckpt-2")


@pytest.mark.large
def test_a_resume_past_num_train_steps_ends_at_once(
    tmp_path, shards, vocab_file, capsys
):
    model_dir = tmp_path / "model"
    pretrain_in_process(model_dir, shards, vocab_file, 2)
    (model_dir / "results.json").unlink()
    shutil.rmtree(model_dir / "preset")
    config = pretrain_config(
        model_dir, shards, vocab_file, num_train_steps=1, save_every=1
    )
    results = run_pretraining(config).results
    assert "Nothing to train: the checkpoint is at step 2, " in (
        capsys.readouterr().out
    )
    assert results["global_step"] == results["resumed_from_step"] == 2
    assert results["history_this_run"] == {}
    assert results["checkpoint"].endswith("ckpt-2")
    assert (model_dir / "results.json").exists()
    assert (model_dir / "preset" / "model.weights.h5").exists()
    assert tf.train.latest_checkpoint(str(model_dir / "checkpoints")).endswith(
        "ckpt-2"
    )
