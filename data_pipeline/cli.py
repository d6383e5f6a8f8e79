"""How the data-pipeline command-line tools end on a user's error.

A mistake in the flags, the input files or the output paths ends the run
with one line on standard error, `ERROR: <what is wrong and what to do>`,
and exit code 2 (absl's code for usage errors), without a traceback or the
usage text. The library's messages name the flag or the file (and the flag
that overrides a refusal); this module only prints them.

An interrupted run (Ctrl-C, or SIGTERM, which Python would otherwise obey
at once, without cleaning up) ends with one `ERROR:` line and exit code
128 + the signal number, after the library removed its temporary files:
outputs are published only when complete.

Errors that are not the user's (a bug, TensorFlow running out of memory)
keep their traceback.

Example (a script's last lines):
>>> if __name__ == "__main__":  # doctest: +SKIP
...     cli.run(main)
"""

import signal
import sys

from absl import app
from absl import flags

USER_ERROR_EXIT_CODE = 2
# What the data pipeline raises for the user's flags, input and output
# files: a bad flag (`app.UsageError`), a bad value or a refused input
# (`ValueError`, `corpus.InputError`), a missing, existing or unwritable
# file (`OSError`, `fileio.OutputError`), a damaged compressed file
# (`EOFError`), and Apache Beam missing for `--runner` (`ImportError`).
USER_ERRORS = (app.UsageError, ValueError, OSError, EOFError, ImportError)


def one_line(message):
    """`message` on one line (its lines joined by spaces)."""
    lines = [line.strip() for line in str(message).splitlines()]
    return " ".join(line for line in lines if line)


def fail(message, exit_code=USER_ERROR_EXIT_CODE):
    """Prints `ERROR: <message>` on one line to stderr and exits."""
    sys.stdout.flush()
    sys.stderr.write(f"ERROR: {one_line(message)}\n")
    sys.stderr.flush()
    sys.exit(exit_code)


def _parse_flags(argv):
    try:
        return flags.FLAGS(argv)
    except flags.Error as e:
        fail(f"{e} (--helpshort lists the flags)")


class _Interrupted(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C's KeyboardInterrupt so that the
    `with`/`finally` blocks that remove temporary files run."""

    signal_number = signal.SIGTERM


# The signals received, so that an interruption that a framework wrapped
# into another exception (Beam: a `RuntimeError`) is still reported as one.
_received_signals = []


def _raise_interrupted(signal_number, frame):
    del frame
    _received_signals.append(signal_number)
    raise _Interrupted()


def _interrupted(number):
    fail(
        f"Interrupted by {signal.Signals(number).name}; the outputs of this "
        "run were not complete and were not published.",
        128 + number,
    )


def run(main):
    """`absl.app.run(main)`, ending user errors and interruptions with one
    `ERROR:` line (see the module docstring)."""

    def wrapped(argv):
        signal.signal(signal.SIGTERM, _raise_interrupted)
        try:
            return main(argv)
        except KeyboardInterrupt as e:
            _interrupted(getattr(e, "signal_number", signal.SIGINT))
        except Exception as e:  # pylint: disable=broad-except
            if _received_signals:
                _interrupted(_received_signals[0])
            if isinstance(e, USER_ERRORS):
                fail(e)
            raise

    app.run(wrapped, flags_parser=_parse_flags)
