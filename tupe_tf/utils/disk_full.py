"""A full disk is one line: recognising "No space left on device".

A write that hits ENOSPC surfaces as an `OSError` (`errno.ENOSPC`) from
Python's own writers, as an `OSError` of h5py naming errno 28 from a
preset's weights, or as TensorFlow's `ResourceExhaustedError` or
`UnknownError` from the checkpoint writer, which keep only the message.
`is_disk_full` recognises all of them (also as the cause of another
exception), and `refusal` makes the `DiskFullError` (a `UserError`) that
the scripts print as one `ERROR:` line: every writer of tupe-tf publishes
only complete outputs, so a rerun once space is freed loses nothing
(pre-training adds the checkpoint it resumes from).

Standard library only: TensorFlow's errors are recognised by their message.

Example:
>>> import errno
>>> error = OSError(errno.ENOSPC, "No space left on device", "out/vocab.txt")
>>> is_disk_full(error)
True
>>> disk_full_message(error)
'No space left on device while writing out/vocab.txt: the disk is full.'
"""

import errno
import re

from tupe_tf.utils.errors import UserError

_NO_SPACE = "No space left on device"
# TensorFlow's file writers name the file before the OS error:
# "<path>; No space left on device" (or ": No space ...").
_PATH_BEFORE_NO_SPACE = re.compile(r"(\S+?)[;:,]?\s+" + _NO_SPACE)


class DiskFullError(UserError, OSError):
    """A write that found the disk full, with what a rerun does."""


def _chain(error):
    """`error`, its cause and context, and theirs."""
    seen = []
    while error is not None and error not in seen:
        seen.append(error)
        error = error.__cause__ or error.__context__
    return seen


def _full_disk_error(error):
    """The first exception of `error`'s chain that reports ENOSPC."""
    for link in _chain(error):
        if isinstance(link, OSError) and link.errno == errno.ENOSPC:
            return link
        if _NO_SPACE in str(getattr(link, "message", None) or link):
            return link
    return None


def is_disk_full(error):
    """Whether `error` (or its cause) is a write that found the disk full."""
    return _full_disk_error(error) is not None


def full_path(error):
    """The path whose write found the disk full, if the error names it."""
    link = _full_disk_error(error)
    if link is None:
        return None
    if isinstance(link, OSError) and link.filename:
        return str(link.filename)
    match = _PATH_BEFORE_NO_SPACE.search(
        str(getattr(link, "message", None) or link)
    )
    return match.group(1) if match else None


def disk_full_message(error, where=None):
    """`No space left on device while writing <path>: the disk is full.`

    Args:
        error: an exception for which `is_disk_full` holds.
        where: named when the error names no path (e.g. the output
            directory).
    """
    path = full_path(error) or where or "an output"
    return f"{_NO_SPACE} while writing {path}: the disk is full."


def refusal(error, where=None, rerun=None):
    """The `DiskFullError` of `error` (`is_disk_full`): `disk_full_message`
    and what a rerun does (`rerun`, else that nothing half-written was
    published)."""
    rerun = rerun or (
        "Nothing half-written was published: free space and run it again."
    )
    return DiskFullError(f"{disk_full_message(error, where)} {rerun}")
