"""What the training scripts' mains share: quiet logs and exit codes.

Every error caused by the user's flags or files ends a script with one
`ERROR:` line on stderr (no traceback) and exit code 2: bad flags found by
absl (`run`), flags refused by a config's `validate` (`app.UsageError`) and
inputs refused by the library (`InvalidInputError`) alike.

Example:

>>> def main(argv):  # doctest: +SKIP
...     config = config_flags.config_from_flags(PretrainConfig)
...     return cli.run_main(run_pretraining, config, print_summary)
>>> if __name__ == "__main__":  # doctest: +SKIP
...     cli.run(main)
"""

import logging
import sys

from absl import app
from absl import flags
from absl import logging as absl_logging

from tupe_tf.training.callbacks import NonFiniteLossError
from tupe_tf.training.config import InvalidInputError

# Bad input is refused (one clear line, no traceback); a non-finite loss
# stops training with the last good checkpoint kept.
EXIT_CODES = {InvalidInputError: 2, app.UsageError: 2, NonFiniteLossError: 3}


def print_error(message):
    """Prints `message` as the run's one `ERROR:` line on stderr."""
    print(f"ERROR: {message}", file=sys.stderr, flush=True)


def run_main(library_call, config, summarize):
    """Runs `library_call(config)` for a script's `main`.

    Args:
        library_call: e.g. `run_pretraining`.
        config: its configuration.
        summarize: prints the one summary of the result.

    Returns:
        The exit code: 0, or `EXIT_CODES` of the error (printed as one
        `ERROR:` line on stderr).
    """
    # TF's own INFO lines (e.g. on every checkpoint) would break the
    # progress bar.
    logging.getLogger("tensorflow").setLevel(logging.WARNING)
    absl_logging.set_verbosity(absl_logging.WARNING)
    try:
        result = library_call(config)
    except tuple(EXIT_CODES) as error:
        print_error(error)
        return next(c for t, c in EXIT_CODES.items() if isinstance(error, t))
    summarize(result)
    return 0


def _parse_flags(argv):
    """absl's flag parsing; a bad flag, or an argument that is not a flag
    (the scripts take none), is one `ERROR:` line and exit code 2."""
    try:
        remaining = flags.FLAGS(argv)
    except flags.Error as error:
        print_error(f"{error} (--helpshort lists the flags).")
        sys.exit(EXIT_CODES[InvalidInputError])
    if len(remaining) > 1:
        print_error(
            f"Unexpected argument(s) {remaining[1:]}: this script takes "
            "only flags, written --name=value (--helpshort lists them)."
        )
        sys.exit(EXIT_CODES[InvalidInputError])
    return remaining


def run(main):
    """`app.run(main)` where an unknown or malformed flag is refused with
    one `ERROR:` line and exit code 2 (absl's own message: two lines,
    exit code 1)."""
    app.run(main, flags_parser=_parse_flags)
