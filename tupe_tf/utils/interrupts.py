"""Signals: one handler and one policy for SIGINT and SIGTERM.

- SIGINT (Ctrl-C), and SIGTERM outside pre-training's steps, interrupt:
  the handler raises `Interrupted`, like Ctrl-C's `KeyboardInterrupt`, so
  that the `with`/`finally` blocks that remove temporary files run. The
  scripts end with one `ERROR: Interrupted by SIG...` line and exit code
  128 + the signal number (`tupe_tf.utils.cli`): an interrupted run
  publishes nothing.
- While pre-training's steps run (`sigterm_requests_stop`), a first
  SIGTERM is a preemption notice (a spot VM gets one some seconds before
  it goes): the step under way finishes, its checkpoint is saved and the
  run ends with exit code 75 (`tupe_tf.training.preemption`). The notice
  gives SIGTERM its default action back, so that a second SIGTERM ends the
  process at once, even inside that save (a TensorFlow op, which Python
  signal handlers wait for).

Python runs a signal handler between two bytecodes of whatever code runs
at that moment. When that is a garbage-collector callback (JAX registers
one) or a `__del__`, the `KeyboardInterrupt` the handler raises is printed
as "Exception ignored in ..." and dropped, and the run would go on to
publish its outputs. So the handler also records the signal, and every
step that publishes (`tupe_tf.utils.fileio`'s atomic writers) first calls
`raise_if_interrupted`: a run that received a signal raises there at the
latest, removes its temporaries and publishes nothing.

Standard library only, like `fileio`, which imports it.

Example:
>>> install()  # doctest: +SKIP
>>> ...  # the run; its atomic writers call raise_if_interrupted()
>>> with sigterm_requests_stop(requests.request):  # doctest: +SKIP
...     model.fit(...)  # a callback stops when `requests` holds a reason
"""

import contextlib
import signal
import threading

_HANDLED_SIGNALS = (signal.SIGINT, signal.SIGTERM)

# The interruptions received since `install`, in order.
_received = []
# The handlers `install` replaced: {signal number: handler}.
_replaced = {}
# While the training steps run, what a SIGTERM calls instead of
# interrupting (`sigterm_requests_stop`).
_stop_request = None


class Interrupted(KeyboardInterrupt):
    """A handled signal, raised like Ctrl-C's `KeyboardInterrupt` so that
    the `with`/`finally` blocks that remove temporary files run.

    Args:
        signal_number: the signal received.
    """

    def __init__(self, signal_number):
        super().__init__(signal.Signals(signal_number).name)
        self.signal_number = signal_number


def _handle(signal_number, frame):
    """The one handler: the policy of the module docstring."""
    del frame
    if signal_number == signal.SIGTERM and _stop_request is not None:
        # A second SIGTERM ends the process at once.
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        _stop_request("SIGTERM")
        return
    _received.append(signal_number)
    raise Interrupted(signal_number)


def install():
    """Handles SIGINT and SIGTERM from now on (a signal the process
    ignores stays ignored) and forgets the signals received before."""
    _received.clear()
    for signal_number in _HANDLED_SIGNALS:
        handler = signal.getsignal(signal_number)
        if handler is not signal.SIG_IGN and handler is not _handle:
            _replaced[signal_number] = signal.signal(signal_number, _handle)


def uninstall():
    """Gives the handlers `install` replaced back and forgets the signals
    received."""
    for signal_number, handler in _replaced.items():
        signal.signal(signal_number, handler)
    _replaced.clear()
    _received.clear()


@contextlib.contextmanager
def sigterm_requests_stop(request):
    """While entered, the first SIGTERM calls `request("SIGTERM")` instead
    of interrupting, and a second one ends the process at once.

    SIGTERM keeps its action where Python cannot set a handler (a thread
    other than the main one) or the process ignores it. When no SIGTERM
    came, the handler it had is back on exit; after one, SIGTERM keeps its
    default action while the run saves and ends.

    Args:
        request: called with the reason, `"SIGTERM"`, from the handler:
            it should only take note (the training loop acts on it after
            the step under way).

    Example:
    >>> with sigterm_requests_stop(requests.request):  # doctest: +SKIP
    ...     model.fit(data, callbacks=[StopOnRequest(requests, saver)])
    """
    global _stop_request
    # Python sets signal handlers from the main thread only.
    if threading.current_thread() is not threading.main_thread() or (
        signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
    ):
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    _stop_request = request
    signal.signal(signal.SIGTERM, _handle)
    try:
        yield
    finally:
        # Cleared first: a SIGTERM from here on interrupts.
        _stop_request = None
        # None: a handler not set from Python, which cannot be set back.
        no_request = signal.getsignal(signal.SIGTERM) is _handle
        if no_request and previous is not None:
            signal.signal(signal.SIGTERM, previous)


def first_received():
    """The first interruption received since `install`, or None."""
    return _received[0] if _received else None


def raise_if_interrupted():
    """Raises `Interrupted` when a signal interrupted the run since
    `install`, even one whose exception a callback swallowed."""
    if _received:
        raise Interrupted(_received[0])
