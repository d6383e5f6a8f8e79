import os
import signal
import sys
import time

import pytest

from tupe_tf.utils import fileio
from tupe_tf.utils import interrupts


@pytest.fixture
def handled():
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    interrupts.install()
    yield
    interrupts.uninstall()
    assert {s: signal.getsignal(s) for s in before} == before


class _SignalsItselfWhenCollected:
    """Receives SIGTERM inside `__del__`, where Python prints the handler's
    exception as "Exception ignored in" and drops it: JAX's garbage
    collector callback swallowed an interruption this way."""

    def __del__(self):
        _send_and_wait(signal.SIGTERM)


def _send_and_wait(signal_number):
    """Sends `signal_number` to this process and runs bytecodes until its
    handler ran (the signal may reach another thread first)."""
    os.kill(os.getpid(), signal_number)
    deadline = time.monotonic() + 10
    while interrupts.first_received() is None:
        assert time.monotonic() < deadline, "the handler never ran"


def _receive_swallowed_sigterm():
    _SignalsItselfWhenCollected()


def test_a_swallowed_signal_is_recorded(handled, monkeypatch):
    swallowed = []
    monkeypatch.setattr(sys, "unraisablehook", swallowed.append)
    _receive_swallowed_sigterm()  # Raises nothing.
    assert [type(s.exc_value) for s in swallowed] == [interrupts.Interrupted]
    assert interrupts.first_received() == signal.SIGTERM
    with pytest.raises(interrupts.Interrupted) as raised:
        interrupts.raise_if_interrupted()
    assert raised.value.signal_number == signal.SIGTERM
    assert isinstance(raised.value, KeyboardInterrupt)


def test_atomic_writers_publish_nothing_after_a_swallowed_signal(
    handled, tmp_path, monkeypatch
):
    monkeypatch.setattr(sys, "unraisablehook", lambda unraisable: None)
    old = tmp_path / "old"
    fileio.write_text_atomically(old, "before\n")
    _receive_swallowed_sigterm()
    with pytest.raises(interrupts.Interrupted):
        fileio.write_text_atomically(old, "after\n")
    with pytest.raises(interrupts.Interrupted):
        with fileio.atomic_directory(tmp_path / "model") as tmp_dir:
            (open(os.path.join(tmp_dir, "weights"), "w")).close()
    assert old.read_text() == "before\n"
    assert sorted(os.listdir(tmp_path)) == ["old"]


def test_writers_publish_without_a_signal(handled, tmp_path):
    fileio.write_text_atomically(tmp_path / "out", "x\n")
    assert interrupts.first_received() is None
    assert (tmp_path / "out").read_text() == "x\n"


def test_sigint_is_handled_unless_ignored(handled):
    # pytest-xdist's workers ignore SIGINT; an ignored signal stays ignored.
    handler = signal.getsignal(signal.SIGINT)
    if handler is signal.SIG_IGN:
        return
    with pytest.raises(interrupts.Interrupted) as raised:
        _send_and_wait(signal.SIGINT)
    assert raised.value.signal_number == signal.SIGINT
    assert interrupts.first_received() == signal.SIGINT


def test_a_sigterm_during_the_steps_requests_a_stop_instead(handled):
    requests = []
    with interrupts.sigterm_requests_stop(requests.append):
        signal.raise_signal(signal.SIGTERM)
        assert requests == ["SIGTERM"]
        # A second SIGTERM would end the process at once.
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    # A preemption notice is no interruption: the run saves and ends.
    assert interrupts.first_received() is None


def test_sigint_and_a_sigterm_after_the_steps_interrupt(handled):
    requests = []
    with interrupts.sigterm_requests_stop(requests.append):
        if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
            with pytest.raises(interrupts.Interrupted):
                signal.raise_signal(signal.SIGINT)
    with pytest.raises(interrupts.Interrupted) as raised:
        signal.raise_signal(signal.SIGTERM)
    assert raised.value.signal_number == signal.SIGTERM
    assert requests == []
