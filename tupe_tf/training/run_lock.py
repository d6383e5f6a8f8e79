"""One run per `--model_dir`: an exclusive lock held while a run writes.

A second run into a directory in use (a scheduler that restarts a job whose
old process is not dead yet) is refused before it writes anything, naming
the other process. The lock is `fcntl.flock` on `<model_dir>/run.lock`,
whose content (host, pid, start time) names the holder. The kernel (on NFS,
the server once the client is gone) releases the lock when its process
ends, however it ends, so a file left by a killed run is taken over with a
warning: no staleness rules, nothing to refresh.

On an object store (`gs://...`) there is no file lock: no lock is taken,
with a warning.

Example:
>>> with hold("runs/tiny/model"):  # doctest: +SKIP
...     train()
"""

import contextlib
import datetime
import fcntl
import json
import os
import socket
import time

from absl import logging

from tupe_tf.utils.errors import UserError

LOCK_NAME = "run.lock"
# Close to this process's start: the module is imported before a run starts.
_START_TIME = round(time.time(), 2)
# The open lock files of this process: {path: file}.
_held = {}


class DirectoryInUseError(UserError):
    """Another live run holds the lock of the output directory."""


def this_process():
    """The lock document of this process."""
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "start_time": _START_TIME,
    }


def describe(text):
    """`host H, pid P, started <UTC time>` of a lock file's content."""
    try:
        holder = json.loads(text)
        started = datetime.datetime.fromtimestamp(
            float(holder["start_time"]), datetime.timezone.utc
        ).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (ValueError, TypeError, KeyError):
        return "a process that has not named itself yet"
    return f"host {holder['host']}, pid {holder['pid']}, started {started}"


def _locked(path):
    """`path` opened and flocked, or `(None, content)` when another open
    file holds it."""
    while True:
        lock = open(path, "a+", encoding="utf-8")  # noqa: SIM115
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            content = lock.read()
            lock.close()
            return None, content
        with contextlib.suppress(FileNotFoundError):
            if os.fstat(lock.fileno()).st_ino == os.stat(path).st_ino:
                return lock, None
        lock.close()  # Its holder removed it in between: open the new one.


def acquire(directory, name=LOCK_NAME, flag="--model_dir"):
    """Takes the lock `<directory>/<name>` for this process.

    Returns:
        The lock's path.

    Raises:
        DirectoryInUseError: a live run holds it; the message names that
            process and `flag`.
    """
    path = os.path.join(directory, name)
    lock, content = _locked(path)
    if lock is None:
        raise DirectoryInUseError(
            f"{flag}={directory!r} is in use by another run "
            f"({describe(content)}; lock file {path}). Wait for it to end "
            "or stop it, or pass another --model_dir."
        )
    lock.seek(0)
    previous = lock.read()
    if previous:
        logging.warning(
            "Taking over the stale lock %s of %s: its process is gone.",
            path,
            describe(previous),
        )
    lock.truncate(0)
    lock.write(json.dumps(this_process()))
    lock.flush()
    _held[path] = lock
    return path


def release(path):
    """Removes the lock `path` if this process holds it."""
    lock = _held.pop(path, None)
    if lock is not None:
        # Removed while still held, so that no other run's lock goes.
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)
        lock.close()


@contextlib.contextmanager
def hold(directory, name=LOCK_NAME, flag="--model_dir"):
    """Holds the lock `<directory>/<name>` for the `with` body (`acquire`,
    released however the body ends).

    On an object store (`://` in `directory`) no lock is taken, with a
    warning.
    """
    directory = os.fspath(directory)
    if "://" in directory:
        logging.warning(
            "%s=%s is on an object store, which has no file lock: no lock "
            "is taken; make sure only one run writes there.",
            flag,
            directory,
        )
        yield None
        return
    path = acquire(directory, name, flag)
    try:
        yield path
    finally:
        release(path)
