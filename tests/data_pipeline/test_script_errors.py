"""The data scripts' inputs as a new user gets them wrong: one `ERROR:` line
naming the flag or file, exit code 2, no traceback, nothing written.

docs/errors.md lists these cases; keep both in step.
"""

import os
import re
import signal
import subprocess
import sys
import time

import pytest

from tests import subprocesses
from tests.data_pipeline import conftest
from tests.data_pipeline.test_scripts import ROOT
from tests.data_pipeline.test_scripts import _run
from tupe_tf.utils import fileio

pytestmark = pytest.mark.large

USAGE = 2
# TensorFlow's logs as a user sees them by default: what TensorFlow logs
# before the `ERROR:` line (e.g. a Python traceback) fails `error_line`.
TF_LOG_LEVEL = "0"


# TensorFlow's C++ start-up log, printed whatever TF_CPP_MIN_LOG_LEVEL says.
TF_START_UP_LOG = re.compile(
    r"^(WARNING: All log messages before absl::InitializeLog|[IWE]\d{4} |"
    r"To enable the following instructions)"
)


def error_line(result, code=USAGE, logs=False):
    """The `ERROR:` line, the last of stderr; before it, at most
    TensorFlow's start-up log, or any log without another `ERROR:` line if
    `logs` (Beam logs its progress)."""
    assert result.returncode == code, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines and lines[-1].startswith("ERROR: "), result.stderr
    others = lines[:-1]
    if logs:
        assert not [x for x in others if x.startswith("ERROR")], result.stderr
    else:
        assert all(TF_START_UP_LOG.match(x) for x in others), result.stderr
    return lines[-1]


def _shards(files, tmp_path, *flags, **replace):
    """build_shards.py with good flags, some replaced or added."""
    settings = conftest.good_flags("build_shards.py", files, tmp_path)
    settings.update(replace)
    args = [f"--{k}={v}" for k, v in settings.items() if v is not None]
    return _run("build_shards.py", *args, *flags, tf_log_level=TF_LOG_LEVEL)


def _vocab(files, tmp_path, *flags, **replace):
    settings = conftest.good_flags("build_vocab.py", files, tmp_path)
    settings.update(replace)
    args = [f"--{k}={v}" for k, v in settings.items() if v is not None]
    return _run("build_vocab.py", *args, *flags, tf_log_level=TF_LOG_LEVEL)


# Refused by absl or `cli.run` before the script's own checks: (flags,
# start of the error). The checks of the settings and files are
# test_input_refusals.py's, in-process.
EARLY_SHARD_CASES = {
    "unexpected argument": (
        {"_extra": "extra"},
        "ERROR: Unexpected argument(s) ['extra']: this script takes only flags, written --name=value (--helpshort lists them).",
    ),
    "no --vocab_file": (
        {"vocab_file": None},
        "ERROR: flag --vocab_file=None: Flag --vocab_file must have a value",
    ),
    "max_seq_length not a number": (
        {"max_seq_length": "long"},
        "ERROR: flag --max_seq_length=long:",
    ),
    "misspelt flag": (
        {"max_seq_lenght": "64"},
        "ERROR: Unknown command line flag 'max_seq_lenght'. Did you mean: max_seq_length ?",
    ),
}


@pytest.mark.parametrize("case", sorted(EARLY_SHARD_CASES))
def test_build_shards_refuses_early(tmp_path, files, case):
    replace, expected = EARLY_SHARD_CASES[case]
    replace = {
        k: v.format(**files) if v is not None else v for k, v in replace.items()
    }
    extra = [replace.pop("_extra")] if "_extra" in replace else []
    start = time.time()
    result = _shards(files, tmp_path, *extra, **replace)
    line = error_line(result)
    assert line.startswith(expected.format(**files)), line
    assert not (tmp_path / "out").exists()
    assert not os.path.exists("/sys/tupe_tf_out")
    assert time.time() - start < 30


@pytest.mark.parametrize(
    "name,expected",
    [
        ("junk", "ERROR: Input file {junk} is not UTF-8 text: 200 of its 200"),
        ("greek", "ERROR: Input file(s) {greek}: 100.0% of the 480 tokens"),
    ],
)
def test_build_shards_refuses_after_reading(tmp_path, files, name, expected):
    result = _shards(files, tmp_path, input=files[name])
    line = error_line(result)
    assert line.startswith(expected.format(**files)), line
    assert not (tmp_path / "out").exists()


def peak_rss_bytes(script, *flags):
    """Runs a script; returns its result and peak RSS (polled VmHWM)."""
    process = start_script(script, *flags)
    status = f"/proc/{process.pid}/status"
    peak = 0
    while process.poll() is None:
        try:
            with open(status) as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        peak = max(peak, int(line.split()[1]) * 1024)
        except OSError:
            pass
        time.sleep(0.05)
    stdout, stderr = process.communicate()
    result = subprocess.CompletedProcess(
        process.args, process.returncode, stdout, stderr
    )
    return result, peak


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="Linux")
def test_huge_line_without_newline(tmp_path, files):
    """50 MB on one line, no newline, no space: read in 256 KiB pieces, each
    one word too long for the tokenizer (one [UNK]) and for learning."""
    huge = tmp_path / "huge.txt"
    with open(huge, "wb") as f:
        for _ in range(50):
            f.write(b"a" * (1 << 20))
    result = _shards(files, tmp_path, input=str(huge))
    line = error_line(result)
    assert line.startswith(f"ERROR: Input file(s) {huge}: 100.0% of the 200 ")
    assert not (tmp_path / "out").exists()
    # Before: learning from one such word took 64 s (vocab_size 100; random
    # letters: minutes), normalising the whole line 3 GB.
    result, peak = peak_rss_bytes(
        "build_vocab.py", f"--input={huge}", f"--output={tmp_path / 'v.txt'}"
    )
    line = error_line(result)
    assert line == (
        "ERROR: Empty corpus: no word of at most 100 bytes (the tokenizer "
        f"makes a longer word one [UNK]) in input file(s) {huge}."
    )
    # Above what the script's imports (TensorFlow, Keras) take alone.
    _, imports_only = peak_rss_bytes("build_vocab.py", "--no_such_flag=1")
    assert 0 < peak - imports_only < 500 * 2**20, (peak, imports_only)
    assert not (tmp_path / "v.txt").exists()


def test_existing_output_dir_needs_overwrite(tmp_path, files):
    out = tmp_path / "out"
    assert _shards(files, tmp_path).returncode == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    line = error_line(_shards(files, tmp_path, num_shards="3"))
    assert line.startswith(
        f"ERROR: --output_dir {out} already holds 3 file(s) (manifest.json, "
        "pretrain-00000-of-00002.tfrecord, pretrain-00001-of-00002.tfrecord); "
        "pass --overwrite"
    )
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    result = _shards(files, tmp_path, "--overwrite", num_shards="3")
    assert result.returncode == 0, result.stderr
    assert len([n for n in os.listdir(out) if ".tfrecord" in n]) == 3


# Refused by absl (the library's refusals: test_input_refusals.py).
@pytest.mark.parametrize(
    "case,replace,expected",
    [
        (
            "no --output",
            {"output": None},
            "ERROR: flag --output=None: Flag --output must have a value other than None.",
        ),
        (
            "unknown learner",
            {"learner": "spm"},
            "ERROR: flag --learner=spm: value should be one of",
        ),
    ],
)
def test_build_vocab_errors(tmp_path, files, case, replace, expected):
    replace = {
        k: v.format(**files) if v is not None else v for k, v in replace.items()
    }
    line = error_line(_vocab(files, tmp_path, **replace))
    assert line.startswith(expected.format(**files)), (case, line)
    assert not (tmp_path / "v").exists()


def test_runner_without_beam(tmp_path, files):
    try:
        import apache_beam  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("Apache Beam is installed")
    line = error_line(_shards(files, tmp_path, runner="DirectRunner"))
    assert line.startswith("ERROR: Apache Beam is not installed: pip install")
    line = error_line(_vocab(files, tmp_path, runner="DirectRunner"))
    assert line.startswith("ERROR: Apache Beam is not installed: pip install")
    assert not (tmp_path / "out").exists() and not (tmp_path / "v").exists()


# --- interrupted runs ------------------------------------------------------------


def _default_sigint():
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_script(script, *flags):
    pythonpath = ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=pythonpath)
    return subprocess.Popen(
        [sys.executable, os.path.join(ROOT, "scripts", script), *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        # pytest-xdist's workers ignore SIGINT, and an ignored signal stays
        # ignored across exec: Python would then install no Ctrl-C handler.
        preexec_fn=_default_sigint,
    )


def wait_for_temporaries(
    process, directory, is_temporary=fileio.is_hidden_temporary, timeout=120
):
    """Waits until `directory` holds a name `is_temporary` accepts (the
    build is under way).

    Other hidden names do not count: the scripts' start-up check creates
    `directory`, writes a probe file in it and removes both again.
    """
    deadline = time.time() + timeout
    while time.time() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"finished first: {process.communicate()}")
        try:
            names = os.listdir(directory)
        except FileNotFoundError:  # Not created yet, or removed again.
            names = []
        if any(is_temporary(n) for n in names):
            return
        time.sleep(0.01)
    process.kill()
    raise AssertionError("no temporary file appeared")


def wait_for_reading(process, path, past=1 << 20, timeout=120):
    """Waits until `process` has read `path` past `past` bytes: it is
    reading its input for real (the scripts sniff each input's first 8192
    bytes at start-up), so its signal handlers are in place."""
    target = os.path.realpath(path)
    fd_dir = f"/proc/{process.pid}/fd"
    deadline = time.time() + timeout
    while time.time() < deadline:
        assert process.poll() is None, process.communicate()
        try:
            names = os.listdir(fd_dir)
        except OSError:
            names = []
        for name in names:
            try:
                if os.readlink(os.path.join(fd_dir, name)) != target:
                    continue
                with open(f"/proc/{process.pid}/fdinfo/{name}") as f:
                    position = int(f.readline().split()[1])  # "pos: N"
            except (OSError, ValueError, IndexError):
                continue
            if position >= past:
                return
        time.sleep(0.01)
    raise AssertionError(f"{path} was not read within {timeout} s")


def big_corpus(path, num_docs=6000):
    path.write_text(conftest.make_corpus_text(num_docs=num_docs))
    return str(path)


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL])
def test_interrupted_build_shards(tmp_path, files, how):
    corpus = big_corpus(tmp_path / "big.txt")
    out = tmp_path / "out"
    process = start_script(
        "build_shards.py",
        f"--input={corpus}",
        f"--vocab_file={files['vocab']}",
        f"--output_dir={out}",
        "--max_seq_length=32",
    )
    wait_for_temporaries(process, out)
    subprocesses.interrupt(process, how)
    _, stderr = process.communicate(timeout=120)
    names = os.listdir(out) if out.exists() else []
    assert "manifest.json" not in names
    assert not [n for n in names if not n.startswith(".")], names
    if how == signal.SIGTERM:
        subprocesses.assert_interrupted(process, stderr, signal.SIGTERM)
        assert "Traceback" not in stderr
        assert not out.exists()  # Its temporaries and the directory removed.
    # A killed run's temporaries do not block the next run (no --overwrite).
    result = _shards(files, tmp_path)
    assert result.returncode == 0, result.stderr
    assert not [n for n in os.listdir(out) if n.startswith(".")]


def test_interrupted_build_vocab(tmp_path, files):
    corpus = big_corpus(tmp_path / "big.txt", num_docs=30000)
    out = tmp_path / "v" / "vocab.txt"
    process = start_script(
        "build_vocab.py",
        f"--input={corpus}",
        f"--output={out}",
        "--vocab_size=200",
    )
    wait_for_reading(process, corpus)  # Counting words.
    subprocesses.interrupt(process, signal.SIGINT)  # Ctrl-C
    _, stderr = process.communicate(timeout=120)
    subprocesses.assert_interrupted(process, stderr, signal.SIGINT)
    assert "Traceback" not in stderr
    assert not (tmp_path / "v").exists()
