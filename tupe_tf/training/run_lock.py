"""One run per `--model_dir`: an exclusive lock file held while a run writes.

A second run into a directory in use (a scheduler that restarts a job whose
old process is not dead yet) is refused before it writes anything, naming
the other process. The lock is `<model_dir>/run.lock`, a JSON document
(host, pid, process start time) that appears complete or not at all: it is
written to a hidden temporary file and hard-linked to its name, which fails
when the name exists (atomic on local and NFS file systems alike).

A lock is stale, and taken over with a warning, when
- it was taken on this host and its pid is not alive, or is alive with
  another process start time (the pid was reused);
- it was taken on another host and has not been refreshed for
  `STALE_AFTER_SECONDS`: the holder touches it every `REFRESH_SECONDS`
  from a background thread, so only a lock whose machine is gone ages.

On an object store (`gs://...`) there is no atomic exclusive create: no
lock is taken, with a warning.

Example:
>>> with hold("runs/tiny/model"):  # doctest: +SKIP
...     train()
"""

import contextlib
import datetime
import functools
import json
import os
import secrets
import socket
import threading
import time

from absl import logging

from tupe_tf.utils.errors import UserError

LOCK_NAME = "run.lock"
REFRESH_SECONDS = 60.0
STALE_AFTER_SECONDS = 600.0


class DirectoryInUseError(UserError):
    """Another live run holds the lock of the output directory."""


def process_start_time(pid):
    """Seconds since the epoch at which process `pid` started, or `None`
    where that is unknown (no `/proc`, or no such process).

    Two processes with the same pid have different start times, which is
    what tells a reused pid from the lock's holder.
    """
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            # The command name (field 2) may hold spaces: split after it.
            fields = f.read().rsplit(")", 1)[1].split()
        with open("/proc/stat", encoding="ascii") as f:
            boot = next(
                int(line.split()[1]) for line in f if line.startswith("btime")
            )
    except (OSError, ValueError, IndexError, StopIteration):
        return None
    ticks = int(fields[19])  # Field 22: start time in clock ticks.
    return round(boot + ticks / os.sysconf("SC_CLK_TCK"), 2)


@functools.cache
def _start_time(pid):
    # Without /proc, the first time asked stands for the start time: a
    # lock's holder must find the same value when it releases the lock.
    return process_start_time(pid) or round(time.time(), 2)


def this_process():
    """The lock document of this process."""
    pid = os.getpid()
    return {
        "host": socket.gethostname(),
        "pid": pid,
        "start_time": _start_time(pid),
    }


def describe(holder):
    """`host H, pid P, started <UTC time>` of a lock document."""
    started = datetime.datetime.fromtimestamp(
        float(holder.get("start_time", 0)), datetime.timezone.utc
    ).strftime("%Y-%m-%d %H:%M:%S UTC")
    return (
        f"host {holder.get('host')}, pid {holder.get('pid')}, started {started}"
    )


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # Another user's process.
        return True
    return True


def stale_reason(holder, age_seconds):
    """Why the lock `holder` (a lock document) is stale, or `None` while
    its run may still be alive.

    Args:
        holder: the lock's JSON document.
        age_seconds: seconds since the lock file was last refreshed.
    """
    if holder.get("host") != socket.gethostname():
        if age_seconds > STALE_AFTER_SECONDS:
            return f"not refreshed for {age_seconds:.0f} s"
        return None
    pid = int(holder.get("pid", -1))
    if pid <= 0 or not _pid_alive(pid):
        return "its process is gone"
    start_time = process_start_time(pid)
    if start_time is not None and start_time != holder.get("start_time"):
        return "its pid now belongs to another process"
    return None


def _read(path):
    """`(document, age in seconds)` of the lock at `path`; `None` when it
    is gone."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        age = time.time() - os.stat(path).st_mtime
    except FileNotFoundError:
        return None
    try:
        return json.loads(text), age
    except ValueError as error:
        raise DirectoryInUseError(
            f"The lock file {path} is not readable JSON ({error}). If no "
            "other run uses this directory, delete it and run again."
        ) from error


def _try_create(path, document):
    """Creates the lock `path` holding `document`; False if it exists."""
    tmp = os.path.join(
        os.path.dirname(path), f".{LOCK_NAME}.{secrets.token_hex(8)}.tmp"
    )
    try:
        with open(tmp, "x", encoding="utf-8") as f:
            json.dump(document, f)
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise
        except OSError:
            # No hard links here (some FUSE and SMB mounts): an exclusive
            # create, which a reader may see empty for an instant.
            with open(path, "x", encoding="utf-8") as f:
                json.dump(document, f)
        return True
    except FileExistsError:
        return False
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)


def acquire(directory, name=LOCK_NAME, flag="--model_dir"):
    """Takes the lock `<directory>/<name>` for this process.

    Returns:
        The lock's path.

    Raises:
        DirectoryInUseError: a live run holds it; the message names that
            process and `flag`.
    """
    path = os.path.join(directory, name)
    document = this_process()
    while not _try_create(path, document):
        found = _read(path)
        if found is None:
            continue  # Released in between: try again.
        holder, age = found
        reason = stale_reason(holder, age)
        if reason is None:
            raise DirectoryInUseError(
                f"{flag}={directory!r} is in use by another run "
                f"({describe(holder)}; lock file {path}). Wait for it to "
                "end or stop it, or pass another --model_dir. If that "
                "process is gone, delete the lock file and run again."
            )
        # Only the lock judged stale is removed, not one taken since.
        current = _read(path)
        if current is not None and current[0] == holder:
            logging.warning(
                "Taking over the stale lock %s of %s: %s.",
                path,
                describe(holder),
                reason,
            )
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)
    return path


def release(path):
    """Removes the lock `path` if this process still holds it."""
    try:
        found = _read(path)
    except DirectoryInUseError:
        return  # Not ours: ours is always readable.
    mine = this_process()
    if found is not None and all(
        found[0].get(k) == mine[k] for k in ("host", "pid", "start_time")
    ):
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)


def _refresh_until(path, stop):
    while not stop.wait(REFRESH_SECONDS):
        with contextlib.suppress(OSError):
            os.utime(path)


@contextlib.contextmanager
def hold(directory, name=LOCK_NAME, flag="--model_dir"):
    """Holds the lock `<directory>/<name>` for the `with` body (`acquire`,
    refreshed every `REFRESH_SECONDS`, released however the body ends).

    On an object store (`://` in `directory`) no lock is taken, with a
    warning.
    """
    directory = os.fspath(directory)
    if "://" in directory:
        logging.warning(
            "%s=%s is on an object store, which has no atomic exclusive "
            "create: no lock is taken; make sure only one run writes there.",
            flag,
            directory,
        )
        yield None
        return
    path = acquire(directory, name, flag)
    stop = threading.Event()
    refresher = threading.Thread(
        target=_refresh_until, args=(path, stop), daemon=True
    )
    refresher.start()
    try:
        yield path
    finally:
        stop.set()
        release(path)
