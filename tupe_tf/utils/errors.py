"""The one base class of every refusal of the user's input.

A flag value, a file, an output path or a combination of settings that
cannot work is refused by raising `UserError` (or a subclass) with a message
that names the flag or the file and says what to do. `tupe_tf.utils.cli`
turns exactly these (and absl's flag errors) into the scripts' one `ERROR:`
line and the class's `exit_code`; any other exception is a bug or a failure
of the machine and keeps its traceback.

`UserError` is a `ValueError`, so Python callers that catch `ValueError`
for a bad argument keep working.

Example:
>>> from tupe_tf.utils.errors import UserError
>>> try:
...     raise UserError("--num_shards must be >= 1; got 0.")
... except ValueError as error:
...     print(error.exit_code, error)
2 --num_shards must be >= 1; got 0.
"""

# absl's exit code for usage errors.
USER_ERROR_EXIT_CODE = 2


class UserError(ValueError):
    """Bad flags, files or settings, refused with one message naming the
    culprit, before anything is written (or, for a file found damaged while
    it is read, with everything already written kept)."""

    exit_code = USER_ERROR_EXIT_CODE


# The refusals of paths, raised by `fileio` and `url_files` (and importable
# from `fileio` as `fileio.OutputError` and so on).
class NoMatchingFileError(UserError, FileNotFoundError):
    """A file or pattern names no existing file (also a
    `FileNotFoundError`)."""


class OutputExistsError(UserError, FileExistsError):
    """An output that exists and is replaced only when asked to (also a
    `FileExistsError`)."""


class OutputError(UserError, OSError):
    """An output path that cannot be created or written; the message names
    it and the flag."""


class RunStopped(Exception):
    """A training run that stopped before its end for a reason outside the
    user's input (preemption, a lost worker), its checkpoints kept so that
    a rerun of the same command resumes. The scripts print it as one
    `ERROR:` line and exit with the subclass's `exit_code`."""

    exit_code = 1


def first_line(error):
    """The first line of `error`'s message that says what failed (a
    `tf.errors.OpError`'s `message`, without TensorFlow's "Graph execution
    error" preamble), or the error's type when it has none: how a refusal
    quotes an exception of a library."""
    for line in str(getattr(error, "message", error)).splitlines():
        line = line.strip()
        if line and not line.startswith("Graph execution error"):
            return line
    return type(error).__name__
