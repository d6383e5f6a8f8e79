"""Ctrl-C and SIGTERM, so that an interrupted run publishes nothing.

Python runs a signal handler between two bytecodes of whatever code runs
at that moment. When that is a garbage-collector callback (JAX registers
one) or a `__del__`, the `KeyboardInterrupt` the handler raises is printed
as "Exception ignored in ..." and dropped, and the run would go on to
publish its outputs. So the handler `install` sets also records the
signal, and every step that publishes (`tupe_tf.utils.fileio`'s atomic
writers) first calls `raise_if_interrupted`: a run that received a signal
raises there at the latest, removes its temporaries and publishes nothing.

Standard library only, like `fileio`, which imports it.

Example:
>>> install()  # doctest: +SKIP
>>> ...  # the run; its atomic writers call raise_if_interrupted()
"""

import signal

_HANDLED_SIGNALS = (signal.SIGINT, signal.SIGTERM)

# The signals received since `install`, in order.
_received = []
# The handlers `install` replaced: {signal number: handler}.
_replaced = {}


class Interrupted(KeyboardInterrupt):
    """A handled signal, raised like Ctrl-C's `KeyboardInterrupt` so that
    the `with`/`finally` blocks that remove temporary files run.

    Args:
        signal_number: the signal received.
    """

    def __init__(self, signal_number):
        super().__init__(signal.Signals(signal_number).name)
        self.signal_number = signal_number


def _record_and_raise(signal_number, frame):
    del frame
    _received.append(signal_number)
    raise Interrupted(signal_number)


def install():
    """Handles SIGINT and SIGTERM from now on (a signal the process
    ignores stays ignored) and forgets the signals received before."""
    _received.clear()
    for signal_number in _HANDLED_SIGNALS:
        handler = signal.getsignal(signal_number)
        if handler is not signal.SIG_IGN and handler is not _record_and_raise:
            _replaced[signal_number] = signal.signal(
                signal_number, _record_and_raise
            )


def uninstall():
    """Gives the handlers `install` replaced back and forgets the signals
    received."""
    for signal_number, handler in _replaced.items():
        signal.signal(signal_number, handler)
    _replaced.clear()
    _received.clear()


def first_received():
    """The first signal received since `install`, or None."""
    return _received[0] if _received else None


def raise_if_interrupted():
    """Raises `Interrupted` when a signal was received since `install`,
    even one whose exception a callback swallowed."""
    if _received:
        raise Interrupted(_received[0])
