"""What the training scripts' mains share: quiet logs and exit codes.

Example:

>>> def main(argv):  # doctest: +SKIP
...     config = config_flags.config_from_flags(PretrainConfig)
...     return cli.run_main(run_pretraining, config, print_summary)
"""

import logging
import sys

from absl import logging as absl_logging

from tupe_tf.training.callbacks import NonFiniteLossError
from tupe_tf.training.config import InvalidInputError

# Bad input is refused before training (one clear line, no traceback); a
# non-finite loss stops training with the last good checkpoint kept.
EXIT_CODES = {InvalidInputError: 2, NonFiniteLossError: 3}


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
        print(f"ERROR: {error}", file=sys.stderr)
        return next(c for t, c in EXIT_CODES.items() if isinstance(error, t))
    summarize(result)
    return 0
