import signal
import sys

import pytest
from absl import app

from tupe_tf.training.callbacks import NonFiniteLossError
from tupe_tf.training.multi_worker import WorkerLostError
from tupe_tf.training.preemption import PreemptedError
from tupe_tf.utils import cli
from tupe_tf.utils import fileio
from tupe_tf.utils.errors import UserError


def run_script(main, monkeypatch, *args):
    """`cli.run(main)` as a script run with `args`; returns its exit code."""
    monkeypatch.setattr(sys, "argv", ["script.py", *args])
    previous = signal.getsignal(signal.SIGTERM)
    try:
        with pytest.raises(SystemExit) as exit_info:
            cli.run(main)
    finally:
        signal.signal(signal.SIGTERM, previous)
    return exit_info.value.code


@pytest.mark.parametrize(
    "error, code",
    [
        (UserError("--seq_length=9 is bad"), 2),
        (fileio.OutputError("--output_dir: not writable"), 2),
        (fileio.NoMatchingFileError("--input: no file matches"), 2),
        # absl's own usage error.
        (app.UsageError("--seq_length must be >= 3."), 2),
        (NonFiniteLossError("nan"), 3),
        # Stopped runs whose rerun resumes.
        (PreemptedError("Preempted (SIGTERM) at step 5"), 75),
        (WorkerLostError("A worker of this multi-worker run is gone"), 69),
    ],
)
def test_user_errors_become_one_line_and_their_exit_code(
    error, code, monkeypatch, capsys
):
    def main(argv):
        raise error

    assert run_script(main, monkeypatch) == code
    assert capsys.readouterr().err == f"ERROR: {error}\n"


@pytest.mark.parametrize("error", [ValueError("bug"), OSError("disk")])
def test_other_exceptions_keep_their_traceback(error, monkeypatch, capsys):
    def main(argv):
        raise error

    with pytest.raises(type(error)):
        run_script(main, monkeypatch)
    assert "ERROR:" not in capsys.readouterr().err


def test_a_stray_argument_is_refused_before_main_runs(monkeypatch, capsys):
    calls = []
    assert run_script(calls.append, monkeypatch, "num_steps=3") == 2
    assert calls == []
    assert capsys.readouterr().err == (
        "ERROR: Unexpected argument(s) ['num_steps=3']: this script takes "
        "only flags, written --name=value (--helpshort lists them).\n"
    )


def test_an_unknown_flag_is_one_error_line(monkeypatch, capsys):
    assert run_script(lambda argv: 0, monkeypatch, "--no_such_flag=1") == 2
    err = capsys.readouterr().err
    assert err.startswith("ERROR: Unknown command line flag 'no_such_flag'")
    assert err.count("\n") == 1


def test_sigterm_is_an_interruption_with_exit_code_128_plus_15(
    monkeypatch, capsys
):
    cleaned = []

    def main(argv):
        try:
            signal.raise_signal(signal.SIGTERM)
        finally:
            cleaned.append(True)

    assert run_script(main, monkeypatch) == 128 + signal.SIGTERM
    assert cleaned == [True]
    assert capsys.readouterr().err.startswith("ERROR: Interrupted by SIGTERM")


def test_run_main_summarizes_the_result():
    summaries = []
    assert cli.run_main(lambda config: config * 2, 21, summaries.append) == 0
    assert summaries == [42]


def test_a_missing_extra_is_a_user_error_naming_it():
    from tupe_tf.utils import extras

    with pytest.raises(UserError, match=r"pip install 'tupe-tf\[figures\]'"):
        extras.import_extra("no_such_module_xyz.sub", "figures", "Drawing")
    assert extras.import_extra("json", "figures", "Drawing").dumps(1) == "1"
