"""Atomic writing, bad presets and the export script's flags."""

import json
import os
import shutil

import pytest

import tupe_tf.export
from tests.training.conftest import run_script
from tupe_tf.export import export_lib

SCRIPT = os.path.join(
    os.path.dirname(__file__), "..", "..", "scripts", "export.py"
)


def test_atomic_export_dir_renames_into_place(tmp_path):
    target = tmp_path / "out"
    with export_lib.atomic_export_dir(str(target)) as tmp_dir:
        assert not target.exists()
        (open(os.path.join(tmp_dir, "saved_model.pb"), "w")).close()
    assert (target / "saved_model.pb").exists()
    assert os.listdir(tmp_path) == ["out"]  # no temporary left behind


def test_existing_dir_is_not_clobbered_without_overwrite(tmp_path):
    target = tmp_path / "out"
    target.mkdir()
    (target / "keep.txt").write_text("old")
    with pytest.raises(FileExistsError, match="--overwrite"):
        with export_lib.atomic_export_dir(str(target)):
            pass
    assert (target / "keep.txt").read_text() == "old"


def test_failed_export_leaves_the_old_export_and_no_temporary(tmp_path):
    target = tmp_path / "out"
    target.mkdir()
    (target / "keep.txt").write_text("old")
    with pytest.raises(RuntimeError):
        with export_lib.atomic_export_dir(str(target), overwrite=True) as d:
            (open(os.path.join(d, "half_written"), "w")).close()
            raise RuntimeError("export failed")
    assert sorted(os.listdir(tmp_path)) == ["out"]
    assert os.listdir(target) == ["keep.txt"]


def test_overwrite_replaces_the_export(tmp_path):
    target = tmp_path / "out"
    target.mkdir()
    (target / "keep.txt").write_text("old")
    with export_lib.atomic_export_dir(str(target), overwrite=True) as d:
        (open(os.path.join(d, "new.txt"), "w")).close()
    assert os.listdir(target) == ["new.txt"]
    assert os.listdir(tmp_path) == ["out"]


def _copy_preset(exports, tmp_path):
    preset = tmp_path / "preset"
    shutil.copytree(exports.classifier_preset, preset)
    return preset


@pytest.mark.large
def test_missing_preset_file_names_the_file(exports, tmp_path):
    preset = _copy_preset(exports, tmp_path)
    os.remove(preset / "model.weights.h5")
    with pytest.raises(ValueError, match="model.weights.h5"):
        tupe_tf.export.export_preset(
            str(preset), str(tmp_path / "out"), "hub_encoder"
        )
    assert not (tmp_path / "out").exists()


@pytest.mark.large
def test_missing_vocabulary_names_the_file(exports, tmp_path):
    preset = _copy_preset(exports, tmp_path)
    os.remove(preset / "assets" / "tokenizer" / "vocabulary.txt")
    with pytest.raises(ValueError, match="vocabulary.txt"):
        tupe_tf.export.export_preset(
            str(preset), str(tmp_path / "out"), "hub_preprocessor"
        )


@pytest.mark.large
def test_preset_of_another_version_is_refused(exports, tmp_path):
    preset = _copy_preset(exports, tmp_path)
    metadata_path = preset / "metadata.json"
    metadata = json.loads(metadata_path.read_text())
    metadata["tupe_tf_version"] = "9.9.0"
    metadata_path.write_text(json.dumps(metadata))
    with pytest.raises(ValueError, match="9.9.0"):
        tupe_tf.export.export_preset(
            str(preset), str(tmp_path / "out"), "serving"
        )


@pytest.mark.large
@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"export_format": "tflite"}, "export_format"),
        ({"export_format": "serving", "seq_length": 2}, "seq_length"),
        ({"export_format": "serving", "seq_length": 64}, "max_sequence_length"),
        (
            {"export_format": "serving", "text_fields": ["a", "b", "c"]},
            "text_fields",
        ),
        ({"export_format": "hub_encoder", "text_fields": ["a"]}, "text_fields"),
    ],
)
def test_bad_arguments_are_named(exports, tmp_path, kwargs, match):
    with pytest.raises(ValueError, match=match):
        tupe_tf.export.export_preset(
            exports.classifier_preset, str(tmp_path / "out"), **kwargs
        )


@pytest.mark.large
def test_loaded_preset_kinds(exports):
    assert export_lib.load_preset(exports.classifier_preset).kind == (
        "classifier"
    )
    # A masked-LM preset exports its backbone.
    assert export_lib.load_preset(exports.backbone_preset).kind == "backbone"


def _script(*args):
    return run_script(SCRIPT, args)


def _assert_one_error_line(result, fragment):
    """Exit code 2, no traceback, one `ERROR:` line naming `fragment`."""
    errors = [
        line for line in result.stderr.splitlines() if line.startswith("ERROR:")
    ]
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    assert len(errors) == 1 and fragment in errors[0], result.stderr[-3000:]


@pytest.mark.large
def test_script_names_bad_flags_and_refuses_to_clobber(exports, tmp_path):
    result = _script(
        f"--preset={exports.classifier_preset}",
        f"--export_dir={tmp_path / 'out'}",
        "--format=tflite",
    )
    _assert_one_error_line(result, "--format")
    result = _script(
        f"--preset={exports.classifier_preset}",
        f"--export_dir={tmp_path / 'out'}",
        "--format=serving",
        "--seq_length=1",
    )
    _assert_one_error_line(result, "--seq_length")
    existing = tmp_path / "existing"
    existing.mkdir()
    result = _script(
        f"--preset={exports.classifier_preset}",
        f"--export_dir={existing}",
        "--format=serving",
    )
    _assert_one_error_line(result, "--overwrite")
    result = _script(
        f"--preset={tmp_path / 'nowhere'}",
        f"--export_dir={tmp_path / 'out'}",
        "--format=serving",
    )
    _assert_one_error_line(result, "--preset")


@pytest.mark.large
def test_script_exports(exports, tmp_path):
    out = tmp_path / "out"
    result = _script(
        f"--preset={exports.classifier_preset}",
        f"--export_dir={out}",
        "--format=hub_preprocessor",
        "--seq_length=12",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert (out / "saved_model.pb").exists()
    metadata = export_lib.read_export_metadata(str(out))
    assert metadata["format"] == "hub_preprocessor"
    assert metadata["seq_length"] == 12
