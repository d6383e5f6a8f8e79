"""User errors of the training, export and analysis scripts.

Each bad input ends the run with one `ERROR:` line naming the culprit and
what to do, exit code 2, no traceback, and loses nothing already written.
Scripts run in subprocesses only where the script boundary is what is
tested; the rest calls the library. docs/errors.md lists the cases.
"""

import os
import shutil
import signal
import struct
import subprocess
import sys
import time

import pytest
import tensorflow as tf

import tupe_tf
from tests import subprocesses
from tests.sizes import encoder_sizes
from tests.training.conftest import FINETUNE_SCRIPT
from tests.training.conftest import PRETRAIN_SCRIPT
from tests.training.conftest import REPO
from tests.training.conftest import TINY_MODEL_FLAGS
from tests.training.conftest import assert_refused
from tests.training.conftest import pretrain_config
from tests.training.conftest import pretrain_in_process
from tests.training.conftest import run_script
from tests.training.conftest import sst2_config
from tests.training.conftest import subprocess_env
from tupe_tf.training import pretrain
from tupe_tf.training.finetune import run_glue
from tupe_tf.training.pretrain import run_pretraining
from tupe_tf.utils import cli
from tupe_tf.utils.errors import UserError

SCRIPTS = os.path.join(REPO, "scripts")
EXPORT_SCRIPT = os.path.join(SCRIPTS, "export.py")


def _records_end(path, count):
    """Byte offset of the end of the first `count` TFRecord records."""
    with open(path, "rb") as f:
        data = f.read()
    offset = 0
    for _ in range(count):
        (length,) = struct.unpack("<Q", data[offset : offset + 8])
        offset += 8 + 4 + length + 4
    return offset


def _truncate_keeping_size(path, records):
    """Keeps `records` records and zeroes the rest: the manifest's size
    check passes, reading fails after them (a shard cut short on disk)."""
    size = os.path.getsize(path)
    end = _records_end(path, records)
    with open(path, "r+b") as f:
        f.seek(end)
        f.write(b"\0" * (size - end))


@pytest.fixture
def shard_copy(tmp_path, shards):
    """A private copy of the session's shard directory, to damage."""
    directory = str(tmp_path / "shards")
    shutil.copytree(shards["dir"], directory)
    names = sorted(n for n in os.listdir(directory) if ".tfrecord" in n)
    return [os.path.join(directory, name) for name in names]


def _pretrain_flags(model_dir, train_files, vocab_file, steps):
    return TINY_MODEL_FLAGS + [
        f"--model_dir={model_dir}",
        f"--train_files={','.join(train_files)}",
        f"--vocab_file={vocab_file}",
        f"--num_train_steps={steps}",
        "--save_every=2",
        "--global_batch_size=8",
        "--shuffle_buffer=64",
        "--learning_rate=1e-3",
        "--warmup_steps=1",
    ]


@pytest.mark.large
def test_shard_corrupted_during_training_is_one_error_line(
    tmp_path, shard_copy, vocab_file
):
    model_dir = tmp_path / "model"
    # A first run (in process: only its checkpoint matters) ends at ckpt-2,
    # with the data settings of the script's resume below.
    config = pretrain_config(
        model_dir,
        {"train": None, "eval": None},
        vocab_file,
        train_files=shard_copy,
        eval_files=[],
        num_train_steps=2,
        save_every=2,
        shuffle_buffer=64,
    )
    run_pretraining(config)
    checkpoints = model_dir / "checkpoints"
    kept = sorted(os.listdir(checkpoints))
    assert tf.train.latest_checkpoint(str(checkpoints)).endswith("ckpt-2")

    bad = shard_copy[1]
    _truncate_keeping_size(bad, records=3)
    flags = _pretrain_flags(model_dir, shard_copy, vocab_file, 4)
    run = run_script(PRETRAIN_SCRIPT, flags)
    message = assert_refused(
        run,
        f"Shard {bad} is truncated or corrupted: read 3 valid records",
        "--skip_bad_shards",
        "ckpt-2, is kept",
    )
    assert "Graph execution error" not in run.stderr, message
    assert sorted(os.listdir(checkpoints)) == kept
    assert tf.train.latest_checkpoint(str(checkpoints)).endswith("ckpt-2")

    # The override the message names exists and trains through the shard.
    run = run_script(PRETRAIN_SCRIPT, flags + ["--skip_bad_shards"])
    assert run.returncode == 0, run.stderr[-4000:]
    assert tf.train.latest_checkpoint(str(checkpoints)).endswith("ckpt-4")


def test_truncated_shard_is_refused_before_training(
    tmp_path, shard_copy, vocab_file
):
    bad = shard_copy[0]
    with open(bad, "r+b") as f:
        f.truncate(_records_end(bad, 3))
    files = {"train": bad, "eval": shard_copy[1]}
    config = pretrain_config(tmp_path / "model", files, vocab_file)
    with pytest.raises(
        UserError,
        match=r"--train_files: 1 bad shard\(s\): .*truncated or modified.*"
        r"pass --skip_bad_shards",
    ):
        run_pretraining(config)
    assert not (tmp_path / "model" / "checkpoints").exists()
    skipping = pretrain_config(
        tmp_path / "model", files, vocab_file, skip_bad_shards=True
    )
    # With every training shard bad there is nothing left to train on.
    with pytest.raises(
        UserError, match="--train_files: no readable shard left"
    ):
        pretrain.prepare_run(skipping)


def test_bad_vocabulary_and_shard_files_are_named(tmp_path, shards, vocab_file):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    for vocab in (str(empty), str(tmp_path)):
        config = pretrain_config(tmp_path / "m", shards, vocab)
        with pytest.raises(
            UserError,
            match=r"--vocab_file='.*' is not a usable vocabulary",
        ):
            pretrain.prepare_run(config)
    # A file that is not a shard of a built shard directory.
    stray = tmp_path / "stray" / "data.tfrecord"
    stray.parent.mkdir()
    stray.write_bytes(b"")
    config = pretrain_config(
        tmp_path / "m", dict(shards, train=str(stray)), vocab_file
    )
    with pytest.raises(
        UserError, match=r"--train_files: .*manifest.*build_shards"
    ):
        pretrain.prepare_run(config)


@pytest.mark.large
@pytest.mark.parametrize(
    "case", ["missing vocab_file", "missing train_files", "default data"]
)
def test_refused_input_leaves_no_model_dir(tmp_path, vocab_file, case):
    # Two missing levels, to see that the parent created goes too.
    runs = tmp_path / "runs"
    model_dir = runs / "model"
    missing_vocab = str(tmp_path / "none" / "vocab.txt")
    missing_shards = str(tmp_path / "none" / "*.tfrecord")
    flags, message = {
        "missing vocab_file": (
            [
                f"--train_files={missing_shards}",
                f"--vocab_file={missing_vocab}",
            ],
            f"--vocab_file={missing_vocab!r} does not exist.",
        ),
        "missing train_files": (
            [f"--train_files={missing_shards}", f"--vocab_file={vocab_file}"],
            f"--train_files: pattern {missing_shards!r} matches no file.",
        ),
        # Without --train_files: the default data's --work_dir (holding
        # the default --model_dir) is not created either.
        "default data": (
            [f"--work_dir={runs}", f"--vocab_file={missing_vocab}"],
            f"--vocab_file={missing_vocab!r} does not exist.",
        ),
    }[case]
    if case != "default data":
        flags.append(f"--model_dir={model_dir}")
    assert_refused(run_script(PRETRAIN_SCRIPT, flags), message)
    assert not runs.exists()
    assert os.listdir(tmp_path) == []


def test_unwritable_work_dir_is_refused_before_building_data(tmp_path):
    from tupe_tf.training import PretrainConfig

    blocker = tmp_path / "a_file"
    blocker.write_text("")
    config = PretrainConfig(work_dir=str(blocker / "work"), model_dir=None)
    with pytest.raises(
        UserError, match=r"--work_dir=.*a_file/work' is not writable"
    ):
        pretrain.prepare_run(config)


@pytest.mark.large
def test_damaged_checkpoint_is_refused_and_left_as_it_is(
    tmp_path, shards, vocab_file
):
    model_dir = tmp_path / "model"
    pretrain_in_process(model_dir, shards, vocab_file, 2)
    checkpoints = model_dir / "checkpoints"

    def snapshot():
        return {
            p: (checkpoints / p).read_bytes() for p in os.listdir(checkpoints)
        }

    def rerun(**overrides):
        config = pretrain_config(
            model_dir,
            shards,
            vocab_file,
            num_train_steps=4,
            save_every=2,
            **overrides,
        )
        return run_pretraining(config)

    def assert_refused_and_unchanged(match, **overrides):
        before = snapshot()
        with pytest.raises(UserError, match=match):
            rerun(**overrides)
        assert snapshot() == before

    # Model flags other than those of the checkpoint.
    assert_refused_and_unchanged(
        r"ckpt-2 cannot be restored", hidden_dim=64, intermediate_dim=64
    )
    # Garbage in the checkpoint's index, then in the `checkpoint` index file.
    index = checkpoints / "ckpt-2.index"
    index.write_bytes(b"garbage" * 10)
    assert_refused_and_unchanged(
        r"--model_dir=.*checkpoint .*ckpt-2 cannot be restored .*"
        r"Nothing was changed"
    )
    (checkpoints / "checkpoint").write_text("{{{ not a checkpoint index")
    assert_refused_and_unchanged(
        r"the checkpoint index .*checkpoint is missing, unreadable or "
        r"names a checkpoint that is gone, but the directory holds ckpt-2"
    )


@pytest.mark.large
def test_flag_errors_are_one_line_in_every_script(tmp_path):
    run = run_script(PRETRAIN_SCRIPT, ["--num_train_step=3"])
    assert_refused(
        run, "Unknown command line flag 'num_train_step'", "num_train_steps"
    )


def test_flags_that_do_not_parse_or_stray_arguments_exit_2(capsys, monkeypatch):
    from absl import flags

    monkeypatch.setattr(flags, "FLAGS", flags.FlagValues())
    with pytest.raises(SystemExit) as exit_:
        cli._parse_flags(["prog", "--flag_that_does_not_exist=1"])
    assert exit_.value.code == 2
    error = capsys.readouterr().err
    assert error.startswith("ERROR: Unknown command line flag")
    assert error.count("\n") == 1
    with pytest.raises(SystemExit) as exit_:
        cli._parse_flags(["prog", "num_train_steps=3"])
    assert exit_.value.code == 2
    assert "Unexpected argument(s) ['num_train_steps=3']" in (
        capsys.readouterr().err
    )


@pytest.fixture
def glue_dir(tmp_path):
    root = tmp_path / "glue"
    (root / "SST-2").mkdir(parents=True)
    rows = "sentence\tlabel\n" + "".join(
        f"{word} film .\t{i % 2}\n" for i, word in enumerate(["good", "bad"])
    )
    for split in ("train", "dev"):
        (root / "SST-2" / f"{split}.tsv").write_text(rows)
    return str(root)


def _copy_preset(tiny_preset, tmp_path):
    preset = str(tmp_path / "preset")
    shutil.copytree(tiny_preset, preset)
    return preset


def _cut(path, fraction=0.5):
    data = open(path, "rb").read()
    open(path, "wb").write(data[: int(len(data) * fraction)])


@pytest.mark.parametrize(
    "damaged", ["config.json", "model.weights.h5", "tokenizer.json"]
)
def test_damaged_preset_is_refused_before_fine_tuning(
    tmp_path, tiny_preset, glue_dir, damaged
):
    preset = _copy_preset(tiny_preset, tmp_path)
    _cut(os.path.join(preset, damaged))
    config = sst2_config(tmp_path / "out", preset, glue_dir)
    with pytest.raises(
        UserError,
        match=rf"--preset: Preset .* is damaged: {damaged} cannot be read",
    ):
        run_glue(config)
    assert not (tmp_path / "out" / "sst2" / "results.json").exists()


def test_unwritable_output_dir_is_refused_before_fine_tuning(
    tmp_path, tiny_preset, glue_dir
):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    config = sst2_config(blocker, tiny_preset, glue_dir)
    with pytest.raises(
        UserError, match=r"--output_dir=.*a_file/sst2' is not writable"
    ):
        run_glue(config)


def test_glue_file_that_is_not_text_is_named(tmp_path, tiny_preset, glue_dir):
    with open(os.path.join(glue_dir, "SST-2", "train.tsv"), "wb") as f:
        f.write(b"sentence\tlabel\n\xff\xfe\x00binary\t1\n")
    config = sst2_config(tmp_path / "out", tiny_preset, glue_dir)
    with pytest.raises(
        UserError,
        match=r"--glue_dir=.*: the GLUE sst2 train file is not UTF-8 text",
    ):
        run_glue(config)


@pytest.mark.large
def test_finetune_script_damaged_preset_is_one_error_line(
    tmp_path, tiny_preset, glue_dir
):
    preset = _copy_preset(tiny_preset, tmp_path)
    _cut(os.path.join(preset, "model.weights.h5"))
    run = run_script(
        FINETUNE_SCRIPT,
        [
            "--task=sst2",
            f"--preset={preset}",
            f"--glue_dir={glue_dir}",
            f"--output_dir={tmp_path / 'out'}",
            "--seq_length=16",
        ],
    )
    assert_refused(run, "is damaged: model.weights.h5 cannot be read")


def _export(*args):
    return run_script(EXPORT_SCRIPT, list(args))


@pytest.mark.large
def test_export_refusals_are_one_error_line_and_touch_nothing(
    tmp_path, tiny_preset
):
    existing = tmp_path / "existing"
    existing.mkdir()
    (existing / "keep.txt").write_text("mine")
    run = _export(
        f"--preset={tiny_preset}",
        f"--export_dir={existing}",
        "--format=serving",
    )
    assert_refused(
        run, f"--export_dir={existing} already exists", "--overwrite"
    )
    assert os.listdir(existing) == ["keep.txt"]

    preset = _copy_preset(tiny_preset, tmp_path)
    _cut(os.path.join(preset, "config.json"))
    run = _export(
        f"--preset={preset}",
        f"--export_dir={tmp_path / 'out'}",
        "--format=hub_encoder",
    )
    assert_refused(run, "is damaged: config.json cannot be read")
    assert not (tmp_path / "out").exists()

    blocker = tmp_path / "a_file"
    blocker.write_text("")
    run = _export(
        f"--preset={tiny_preset}",
        f"--export_dir={blocker / 'out'}",
        "--format=hub_preprocessor",
    )
    assert_refused(run, "--export_dir's parent directory=", "is not writable")


@pytest.mark.large
def test_interrupted_export_leaves_no_export_dir(tmp_path, tiny_preset):
    out = tmp_path / "out"
    process = subprocess.Popen(
        [
            sys.executable,
            EXPORT_SCRIPT,
            f"--preset={tiny_preset}",
            f"--export_dir={out}",
            "--format=serving",
            "--seq_length=32",
        ],
        env=subprocess_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.time() + 120
        while time.time() < deadline and process.poll() is None:
            if any(n.startswith(".out.tmp-") for n in os.listdir(tmp_path)):
                break
            time.sleep(0.05)
        subprocesses.interrupt(process, signal.SIGKILL)
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert not out.exists()
    leftovers = os.listdir(tmp_path)
    assert leftovers and all(n.startswith(".out.tmp-") for n in leftovers)
    # Nothing half written is in the way of the next export.
    import tupe_tf.export

    tupe_tf.export.export_preset(
        tiny_preset, str(out), "hub_preprocessor", seq_length=32
    )
    assert (out / "saved_model.pb").exists()


@pytest.mark.large
def test_visualize_and_compare_refusals_are_one_error_line(
    tmp_path, tiny_preset
):
    preset = _copy_preset(tiny_preset, tmp_path)
    _cut(os.path.join(preset, "model.weights.h5"))
    run = run_script(
        os.path.join(SCRIPTS, "visualize.py"),
        [f"--preset={preset}", f"--output_dir={tmp_path / 'figures'}"],
    )
    assert_refused(run, "is damaged: model.weights.h5 cannot be read")
    assert not (tmp_path / "figures").exists()
    run = run_script(
        os.path.join(SCRIPTS, "compare.py"),
        [
            "--from_results",
            "--variants=tupe-r,tupe-rr",
            f"--results_dir={tmp_path / 'results'}",
            f"--figures_dir={tmp_path / 'figures'}",
        ],
    )
    assert_refused(run, "--variants has unknown names ['tupe-rr']")


@pytest.mark.parametrize(
    "settings, message",
    [
        (
            dict(model=dict(max_sequence_length=64)),
            r"--seq_length=128 is above the model's max_sequence_length=64",
        ),
        (
            dict(optimizer=dict(learning_rate=-1.0)),
            r"--learning_rate=-1 is out of range: it must be > 0\.",
        ),
        (
            dict(eval_files=["held_out*.tfrecord"]),
            r"--eval_files needs --train_files",
        ),
    ],
)
def test_flag_only_refusals_come_before_the_default_data_is_built(
    tmp_path, settings, message
):
    from tupe_tf.training import config as config_lib

    nested = {
        "model": config_lib.ModelConfig,
        "optimizer": config_lib.OptimizerConfig,
    }
    settings = {
        key: nested[key](**value) if key in nested else value
        for key, value in settings.items()
    }
    work_dir = tmp_path / "work"
    config = config_lib.PretrainConfig(work_dir=str(work_dir), **settings)
    with pytest.raises(UserError, match=message):
        pretrain.prepare_run(config)
    built = os.listdir(work_dir) if work_dir.exists() else []
    assert [name for name in built if name != "model"] == []


@pytest.mark.large
def test_export_refuses_what_a_runtime_cannot_convert(tmp_path):
    pytest.importorskip(
        "ai_edge_litert.interpreter", reason="the litert extra is not installed"
    )
    preset = str(tmp_path / "preset")
    tupe_tf.TupeBackbone(
        20,
        max_sequence_length=16,
        position_encoding="sinusoidal",
        **encoder_sizes(8, num_layers=1),
    ).save_to_preset(preset)
    out = tmp_path / "out"
    run = _export(
        f"--preset={preset}",
        f"--export_dir={out}",
        "--format=litert",
        "--seq_length=16",
        "--nofold_positional_bias",
    )
    assert_refused(run, "--format=litert", "sinusoidal", "--fold_positional")
    assert os.listdir(tmp_path) == ["preset"]
