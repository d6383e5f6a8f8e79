"""How every script of tupe-tf starts and ends: one runner, one policy.

- A flag that does not parse, or an argument that is not a flag (the
  scripts take only flags), ends the run with one `ERROR:` line and exit
  code 2, before anything is built or written.
- A `UserError` (`tupe_tf.utils.errors`) or absl's `app.UsageError`, raised
  by the library for the user's flags, files or outputs, ends the run with
  one `ERROR: <message>` line on stderr and the error's `exit_code` (2, or
  3 for a training loss that stopped being finite), without a traceback.
- An interrupted run (Ctrl-C, or SIGTERM, which Python would otherwise obey
  at once, without cleaning up) ends with one `ERROR:` line and exit code
  128 + the signal number, after the library removed its temporary files:
  outputs are published only when complete (`tupe_tf.utils.interrupts`).
- During pre-training's steps SIGTERM is a preemption notice instead: the
  checkpoint of the step the run is at is saved first. A run stopped so,
  or by a lost worker (`RunStopped`), ends with one `ERROR:` line naming
  the checkpoint a rerun resumes from and the error's `exit_code` (75,
  69: `tupe_tf.training.preemption`, `tupe_tf.training.multi_worker`).
- A write that finds the disk full ends with one `ERROR:` line naming the
  output and exit code 2 (`tupe_tf.utils.disk_full.refusal`).
- Any other exception is a bug or a failure of the machine (out of memory)
  and keeps its traceback.

Example (a script's last lines):
>>> def main(argv):  # doctest: +SKIP
...     config = config_flags.config_from_flags(PretrainConfig)
...     return cli.run_main(run_pretraining, config, print_summary)
>>> if __name__ == "__main__":  # doctest: +SKIP
...     cli.run(main)
"""

import logging
import signal
import sys

from absl import app
from absl import flags
from absl import logging as absl_logging

from tupe_tf.utils import disk_full
from tupe_tf.utils import interrupts
from tupe_tf.utils.errors import USER_ERROR_EXIT_CODE
from tupe_tf.utils.errors import RunStopped
from tupe_tf.utils.errors import UserError


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


def quiet_logs():
    """Keeps TensorFlow's and absl's INFO lines (e.g. one per checkpoint)
    from breaking a training script's progress bar."""
    logging.getLogger("tensorflow").setLevel(logging.WARNING)
    absl_logging.set_verbosity(absl_logging.WARNING)


def run_main(library_call, config, summarize):
    """A training script's `main`: quiet logs, `library_call(config)`, then
    `summarize(result)`; returns exit code 0 (errors are `run`'s).

    Args:
        library_call: e.g. `tupe_tf.training.pretrain.run_pretraining`.
        config: its configuration.
        summarize: prints the one summary of the result.
    """
    quiet_logs()
    summarize(library_call(config))
    return 0


def _parse_flags(argv):
    """absl's flag parsing; a bad flag, or an argument that is not a flag,
    is one `ERROR:` line and exit code 2."""
    try:
        remaining = flags.FLAGS(argv)
    except flags.Error as error:
        fail(f"{error} (--helpshort lists the flags).")
    if len(remaining) > 1:
        fail(
            f"Unexpected argument(s) {remaining[1:]}: this script takes "
            "only flags, written --name=value (--helpshort lists them)."
        )
    return remaining


def _interrupted(number):
    fail(
        f"Interrupted by {signal.Signals(number).name}; the outputs of this "
        "run were not complete and were not published.",
        128 + number,
    )


def run(main):
    """`absl.app.run(main)` under the policy of the module docstring.

    Ends the process as `app.run` does, with `SystemExit` and the exit code.

    Args:
        main: the script's `main(argv)`; its return value is the exit code
            (None: 0).
    """

    def wrapped(argv):
        interrupts.install()
        try:
            return main(argv)
        except KeyboardInterrupt as e:
            _interrupted(getattr(e, "signal_number", signal.SIGINT))
        except Exception as e:  # pylint: disable=broad-except
            # A framework may wrap the interruption into another exception
            # (Beam: a `RuntimeError`).
            if interrupts.first_received() is not None:
                _interrupted(interrupts.first_received())
            if isinstance(e, (UserError, RunStopped)):
                fail(e, e.exit_code)
            if isinstance(e, app.UsageError):
                fail(e)
            if disk_full.is_disk_full(e):
                fail(disk_full.refusal(e))
            raise
        finally:
            interrupts.uninstall()

    app.run(wrapped, flags_parser=_parse_flags)
