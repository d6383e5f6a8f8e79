"""Helpers for tests that signal a script's process."""

import signal
import time


def _is_stopped(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            # "pid (comm) state ...": comm may hold spaces and parentheses.
            return f.read().rsplit(")", 1)[1].split()[0] == "T"
    except (OSError, IndexError):
        return False


def interrupt(process, how):
    """Sends signal `how` to a `process` that is certainly still running.

    The process is frozen (SIGSTOP) first and checked: a run that finished
    between the test's last look and the signal would otherwise make the
    test fail at random (it did in CI). SIGCONT then lets
    it handle `how`.
    """
    process.send_signal(signal.SIGSTOP)
    try:
        while process.poll() is None and not _is_stopped(process.pid):
            time.sleep(0.001)  # SIGSTOP is delivered asynchronously.
        assert process.poll() is None, (
            f"finished before it could be interrupted: {process.communicate()}"
        )
        process.send_signal(how)
    finally:
        process.send_signal(signal.SIGCONT)


def assert_interrupted(process, stderr, how):
    """Asserts that `process` (its `stderr` read) exited on signal `how`
    with `ERROR: Interrupted by <signal>;` as its last line."""
    assert process.returncode == 128 + how, stderr
    name = signal.Signals(how).name
    last_line = stderr.strip().splitlines()[-1]
    assert last_line.startswith(f"ERROR: Interrupted by {name};"), stderr
