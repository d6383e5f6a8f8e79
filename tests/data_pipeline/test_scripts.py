"""scripts/build_vocab.py and scripts/build_shards.py as subprocesses."""

import json
import os
import subprocess
import sys

import pytest

from tests.data_pipeline import conftest

pytestmark = pytest.mark.large

ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)


def _run(script, *flags, tf_log_level="3"):
    # The scripts import the checkout under test, not the installed package.
    pythonpath = ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")
    env = dict(
        os.environ, TF_CPP_MIN_LOG_LEVEL=tf_log_level, PYTHONPATH=pythonpath
    )
    return subprocess.run(
        [sys.executable, os.path.join(ROOT, "scripts", script), *flags],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


# Statically masked, gzip-compressed shards of length 64.
STATIC_GZIP_FLAGS = (
    "--max_seq_length=64",
    "--num_shards=2",
    "--seed=1",
    "--lowercase",
    "--static_masking",
    "--dupe_factor=2",
    "--compression=gzip",
)


def test_build_vocab_then_shards_end_to_end(tmp_path, corpus_file):
    vocab = tmp_path / "vocab.txt"
    result = _run(
        "build_vocab.py",
        f"--input={corpus_file}",
        "--vocab_size=150",
        f"--output={vocab}",
        "--lowercase",
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["vocab_size"] == len(
        vocab.read_text().splitlines()
    )

    def build_shards(output_dir, *flags):
        return _run(
            "build_shards.py",
            f"--input={corpus_file}",
            f"--vocab_file={vocab}",
            f"--output_dir={output_dir}",
            *flags,
        )

    out = tmp_path / "shards"
    result = build_shards(out, *STATIC_GZIP_FLAGS)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    manifest = json.loads((out / "manifest.json").read_text())
    assert summary["examples"] == manifest["num_examples"] > 0
    assert manifest["schema"] == "static" and manifest["compression"] == "GZIP"
    # Second run into the same directory: refused without --overwrite.
    result = build_shards(out)
    assert result.returncode != 0
    assert "--overwrite" in result.stderr
    # Determinism across processes (protobuf map order is per process unless
    # serialized deterministically).
    again = tmp_path / "again"
    result = build_shards(again, *STATIC_GZIP_FLAGS)
    assert result.returncode == 0, result.stderr
    assert (again / "manifest.json").read_bytes() == (
        out / "manifest.json"
    ).read_bytes()
    for name in os.listdir(out):
        assert (again / name).read_bytes() == (out / name).read_bytes(), name


def test_bad_flags_and_inputs_are_named(tmp_path, vocab_file):
    def build_shards(*flags):
        output_dir = f"--output_dir={tmp_path / 'o'}"
        return _run(
            "build_shards.py", f"--vocab_file={vocab_file}", output_dir, *flags
        )

    result = build_shards("--num_shards=0")
    assert result.returncode != 0 and "--num_shards" in result.stderr
    result = build_shards("--dupe_factor=3")
    assert result.returncode != 0 and "--static_masking" in result.stderr
    result = build_shards(f"--input={tmp_path / 'gone.txt'}")
    assert result.returncode != 0 and "gone.txt" in result.stderr
    assert not os.path.exists(tmp_path / "o")
    bad_vocab = conftest.write_vocab(tmp_path / "bad.txt", drop=("[CLS]",))
    result = _run(
        "build_vocab.py",
        f"--input={bad_vocab}",
        "--vocab_size=3",
        f"--output={tmp_path / 'v.txt'}",
    )
    assert result.returncode != 0 and "--vocab_size" in result.stderr
