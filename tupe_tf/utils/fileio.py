"""File helpers shared by `data_pipeline` and `tupe_tf`.

Atomic publishing of files (JSON included) and directories, the checks
that an output directory can be written, comma-separated pattern
expansion, and sha256 hashing. Standard library only, so that importing it
(as `scripts/build_shards.py` does at start-up) never pulls in TensorFlow.

A URL (`gs://bucket/run`, any scheme `tf.io.gfile` serves: `is_url`) is
written into a local temporary, then published through `tf.io.gfile`,
imported only then (`url_files`, which also holds `is_url`,
`absolute_path`, `exists`, `remove_tree` and `check_scheme`, importable
from here as before); local paths keep the local file system's calls
(`os.replace`, `os.rename`, `fsync`), whose atomicity a remote file
system does not offer (`atomic_files`).
"""

import contextlib
import errno
import glob
import hashlib
import json
import os
import secrets
import shutil
import tempfile

from tupe_tf.utils import interrupts
from tupe_tf.utils.errors import NoMatchingFileError
from tupe_tf.utils.errors import OutputError
from tupe_tf.utils.errors import OutputExistsError
from tupe_tf.utils.errors import UserError
from tupe_tf.utils.url_files import TMP_SUFFIX
from tupe_tf.utils.url_files import absolute_path
from tupe_tf.utils.url_files import check_scheme
from tupe_tf.utils.url_files import exists
from tupe_tf.utils.url_files import gfile_errors
from tupe_tf.utils.url_files import is_url
from tupe_tf.utils.url_files import open_text
from tupe_tf.utils.url_files import publish_url
from tupe_tf.utils.url_files import remote_write_probe
from tupe_tf.utils.url_files import remove_tree as remove_tree

_GLOB_CHARS = "*?["


def sha256_hex(data):
    """Hex sha256 of `data` (bytes)."""
    return hashlib.sha256(data).hexdigest()


def file_sha256(path, chunk_size=1 << 20):
    """Hex sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            chunk = f.read(chunk_size)
            if not chunk:
                break
            digest.update(chunk)
    return digest.hexdigest()


def _remove_quietly(path):
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def _new_file(path):
    # O_EXCL: never an existing file; the mode is the usual one (umask).
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))


def _new_private_directory(path):
    os.mkdir(path, 0o700)


def _create_registered(registry, directory, prefix, suffix, create):
    """Creates `<directory>/<prefix><random><suffix>` with `create(path)`.

    The path is appended to `registry` before it exists, so a Ctrl-C or
    SIGTERM raised between any two steps cannot leave behind an entry its
    owner's cleanup does not know of (`tempfile.mkstemp` only returns the
    path after creating it: an interrupt in between leaked the file).

    Returns:
      The path.
    """
    while True:
        path = os.path.join(
            directory, f"{prefix}{secrets.token_hex(8)}{suffix}"
        )
        registry.append(path)
        try:
            create(path)
            return path
        except FileExistsError:
            registry.remove(path)  # Somebody else's; not ours to remove.


def _name_output(error, path):
    """Names `path` in a full disk's `OSError` that names no file (a failed
    `write` names none), so that the message says which output it stopped."""
    full = (errno.ENOSPC, errno.EDQUOT)
    if (
        isinstance(error, OSError)
        and error.errno in full
        and not error.filename
    ):
        error.filename = path


@contextlib.contextmanager
def atomic_files(paths):
    """Yields temporary sibling paths that replace `paths` on success.

    Each temporary file is hidden (`.<name>.<random>.tmp`) in the directory
    of its final path (same filesystem, so `os.replace` is atomic). When the
    `with` body succeeds and the run was not interrupted
    (`interrupts.raise_if_interrupted`), every temporary file replaces its
    final path, in order; when it raises (or is interrupted, even while the
    temporaries are being created), every temporary file is removed and the
    final paths are left as they were.

    URLs (`is_url`, all of `paths` or none) get local temporary files in
    the system's temporary directory, so that the body writes them as
    any file; on success each is uploaded to a hidden sibling of its URL
    and renamed over it with `tf.io.gfile` (`url_files.publish_url`).
    Each file then appears whole as far as the file system's rename is
    atomic: on GCS a rename is a copy and a delete, and an object is
    replaced whole (a reader sees the old or the new one), so each file
    is, though not all of them at one instant; a run killed while
    publishing can leave a hidden `.<name>.<random>.tmp` beside them.

    Args:
        paths: the final file paths, or URLs.

    Example:
    >>> with atomic_files(["a.txt", "b.txt"]) as (tmp_a, tmp_b):  # doctest: +SKIP
    ...     write(tmp_a); write(tmp_b)
    """
    paths = [os.fspath(p) for p in paths]
    urls = [p for p in paths if is_url(p)]
    if urls:
        if len(urls) < len(paths):
            raise ValueError(f"Local paths and URLs mixed: {paths}")
        with _atomic_url_files(urls) as temporaries:
            yield temporaries
        return
    temporaries = []
    try:
        for path in paths:
            directory = os.path.dirname(os.path.abspath(path))
            os.makedirs(directory, exist_ok=True)
            _create_registered(
                temporaries,
                directory,
                "." + os.path.basename(path) + ".",
                TMP_SUFFIX,
                _new_file,
            )
        yield list(temporaries)
        interrupts.raise_if_interrupted()
        for tmp_path, path in zip(temporaries, paths):
            os.replace(tmp_path, path)
    except BaseException as error:
        for tmp_path in temporaries:
            _remove_quietly(tmp_path)
        _name_output(error, ", ".join(paths))
        raise


@contextlib.contextmanager
def _atomic_url_files(urls):
    """`atomic_files` for URLs: local temporaries, published by
    `url_files.publish_url` when the body succeeds."""
    with work_directory(tempfile.gettempdir(), ".upload-") as local_dir:
        # An index keeps two URLs of the same name apart.
        temporaries = [
            os.path.join(local_dir, f"{i}-{url.rstrip('/').rsplit('/')[-1]}")
            for i, url in enumerate(urls)
        ]
        for tmp_path in temporaries:
            _new_file(tmp_path)
        yield list(temporaries)
        interrupts.raise_if_interrupted()
        for tmp_path, url in zip(temporaries, urls):
            publish_url(tmp_path, url)


@contextlib.contextmanager
def work_directory(parent, prefix):
    """Yields a new private hidden directory `<parent>/<prefix><random>`,
    removed with its content when the `with` ends, however it ends.

    Example:
    >>> with work_directory("out", ".beam-vocab-") as work_dir:  # doctest: +SKIP
    ...     run_pipeline(temp_location=work_dir)
    """
    created = []
    try:
        yield _create_registered(
            created, os.fspath(parent), prefix, "", _new_private_directory
        )
    finally:
        for path in created:
            shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def atomic_file(path):
    """Yields one temporary path that replaces `path` on success.

    See `atomic_files`.

    Example:
    >>> with atomic_file("plot.png") as tmp:  # doctest: +SKIP
    ...     fig.savefig(tmp, format="png")
    """
    with atomic_files([path]) as (tmp_path,):
        yield tmp_path


def write_text_atomically(path, text):
    """Writes `text` (UTF-8, `\\n` newlines, fsynced) to `path` atomically."""
    with atomic_file(path) as tmp_path:
        with open(tmp_path, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())


def write_json_atomically(path, obj, indent=2, sort_keys=False, default=None):
    """Writes `obj` as JSON text, ending with a newline, to `path`
    atomically (`write_text_atomically`).

    Args:
        path: the final file path.
        obj: what `json.dumps` takes.
        indent, sort_keys, default: as in `json.dumps` (`default=str`
            writes any other object as its string).

    Example:
    >>> write_json_atomically("run/results.json", {"loss": 2.5})  # doctest: +SKIP
    """
    text = json.dumps(obj, indent=indent, sort_keys=sort_keys, default=default)
    write_text_atomically(path, text + "\n")


def read_json(path, advice):
    """The JSON document in `path`, or a `UserError` naming the file.

    Args:
        path: the file.
        advice: what the user can do about a damaged or unreadable file,
            ending the message.
    """
    path = os.fspath(path)
    try:
        with open_text(path) as f:
            return json.load(f)
    except (OSError, ValueError, *gfile_errors(path)) as error:
        raise UserError(f"{path} cannot be read ({error}): {advice}") from error


@contextlib.contextmanager
def atomic_directory(path, overwrite=False, what="Directory"):
    """Yields a temporary directory that becomes `path` on success.

    The temporary directory is a hidden sibling of `path` (same filesystem,
    so the final `os.rename` is atomic). On any error, or when the run was
    interrupted (`interrupts.raise_if_interrupted`), it is removed and
    `path` is left as it was. An existing `path` is replaced only with
    `overwrite=True`, and only after the new content is complete: it is moved
    aside first, so `path` is always either the old or the new directory.

    A URL (`is_url`) gets a local temporary directory (in the system's
    temporary directory, so that local writers such as keras-hub's
    `save_to_preset` work), uploaded on success to a hidden sibling
    `.<name>.tmp-<random>` and renamed to `path` with `tf.io.gfile`, an
    existing `path` moved aside first as locally
    (`url_files.publish_url`). No half-written upload is ever at `path`,
    but the renames are only as atomic as the file system's: on GCS a
    directory is renamed object by object (each a copy and a delete), so
    a reader, or a run killed, during the renames can find part of the
    new directory at `path` (the old one then complete at
    `.<name>.old-<random>`).

    Args:
        path: the final directory, or a URL.
        overwrite: replace an existing `path`.
        what: how the error message names `path`.

    Raises:
        OutputExistsError (a `UserError` and `FileExistsError`): `path`
            exists and `overwrite` is False.

    Example:
    >>> with atomic_directory("out/model") as tmp_dir:  # doctest: +SKIP
    ...     tf.saved_model.save(module, tmp_dir)
    """
    path = absolute_path(path)
    if exists(path) and not overwrite:
        raise OutputExistsError(
            f"{what} {path!r} already exists. Pass --overwrite "
            "(overwrite=True) to replace it."
        )
    if is_url(path):
        with _atomic_url_directory(path) as tmp_dir:
            yield tmp_dir
        return
    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    name = os.path.basename(path)
    created = []
    try:
        tmp_dir = _create_registered(
            created, parent, f".{name}.tmp-", "", _new_private_directory
        )
        yield tmp_dir
        interrupts.raise_if_interrupted()
    except BaseException as error:
        for directory in created:
            shutil.rmtree(directory, ignore_errors=True)
        _name_output(error, path)
        raise
    old_dir = None
    if os.path.exists(path):
        # A free name (64 random bits): `rename` replaces no directory
        # that holds anything.
        old_dir = os.path.join(parent, f".{name}.old-{secrets.token_hex(8)}")
        os.rename(path, old_dir)
    try:
        os.rename(tmp_dir, path)
    except BaseException:
        if old_dir is not None:
            os.rename(old_dir, path)
        shutil.rmtree(tmp_dir, ignore_errors=True)
        raise
    if old_dir is not None:
        shutil.rmtree(old_dir, ignore_errors=True)


@contextlib.contextmanager
def _atomic_url_directory(url):
    """`atomic_directory` for a URL, once `overwrite` is checked: a local
    temporary directory, published by `url_files.publish_url` on success."""
    with work_directory(tempfile.gettempdir(), ".upload-") as local_dir:
        yield local_dir
        interrupts.raise_if_interrupted()
        publish_url(local_dir, url)


def _missing_directories(directory):
    """`directory` and its missing ancestors, deepest first."""
    missing = []
    while not os.path.lexists(directory):
        missing.append(directory)
        parent = os.path.dirname(directory)
        if parent == directory:
            break
        directory = parent
    return missing


@contextlib.contextmanager
def made_directory(path, flag, keep=True):
    """Creates `path` (and missing parents) and checks that a file can be
    written in it, for the `with` body (a remote path, `gs://...`, through
    `tf.io.gfile`).

    The local directories it created are removed again while empty if the
    body fails, or when it ends with `keep=False` (a check before a long
    build), so a refused or failed run leaves the file system as it found
    it.

    Raises:
        OutputError: `<flag>='<path>' is not writable: <OS error>`, before
            the body runs (no permission, a file in the way, a read-only
            file system), or a URL of a scheme TensorFlow has no file
            system for (`check_scheme`).

    Example:
    >>> with made_directory("out/shards", "--output_dir"):  # doctest: +SKIP
    ...     build_into("out/shards")
    """
    path = os.fspath(path)
    remote = is_url(path)
    if remote:
        check_scheme(path, flag)
    missing = [] if remote else _missing_directories(os.path.abspath(path))
    # One `try` from the creation on: an interrupt just after `makedirs`
    # must not leave the directories behind.
    try:
        try:
            if remote:
                remote_write_probe(path)
            else:
                os.makedirs(path, exist_ok=True)
                _write_probe(path)
        except OSError as error:
            raise OutputError(
                f"{flag}={path!r} is not writable: {error.strerror or error}"
            ) from error
        yield path if remote else os.path.abspath(path)
    except BaseException:
        _remove_empty_directories(missing)
        raise
    if not keep:
        _remove_empty_directories(missing)


def _remove_empty_directories(directories):
    """Removes `directories` (deepest first) while they are empty."""
    for directory in directories:
        try:
            os.rmdir(directory)
        except OSError:
            break


def _write_probe(directory):
    """Creates and removes a hidden file in `directory` (a permission test
    that also holds for root and read-only file systems); `OSError` if it
    cannot be created."""
    probes = []
    try:
        _create_registered(probes, directory, ".write-test-", "", _new_file)
    finally:
        for probe in probes:
            _remove_quietly(probe)


def make_writable_directory(directory, flag):
    """`made_directory`, kept: an output flag's directory checked before a
    run.

    Example:
    >>> make_writable_directory("runs/model", "--model_dir")  # doctest: +SKIP
    """
    with made_directory(directory, flag):
        pass


def is_hidden_temporary(name):
    """Whether `name` is a hidden temporary of `atomic_files` (left behind
    by a process that was killed)."""
    return name.startswith(".") and name.endswith(TMP_SUFFIX)


def split_patterns(patterns):
    """Comma-separated string(s) or a list of them -> stripped patterns.

    Example:
    >>> split_patterns("a.txt, b/*.gz,")
    ['a.txt', 'b/*.gz']
    >>> split_patterns(["a.txt", "b.txt,c.txt"])
    ['a.txt', 'b.txt', 'c.txt']
    """
    if isinstance(patterns, (str, os.PathLike)):
        patterns = [patterns]
    items = [os.fspath(p) for p in patterns]
    return [p.strip() for item in items for p in item.split(",") if p.strip()]


def is_glob(pattern):
    """Whether `pattern` holds a glob character (`*`, `?` or `[`)."""
    return any(c in pattern for c in _GLOB_CHARS)


def expand_pattern(pattern, what, glob_fn=glob.glob, exists_fn=os.path.exists):
    """Expands one file or glob into a sorted list of paths.

    Args:
        pattern: a path or a glob.
        what: names the source in errors (e.g. `"--train_files"`).
        glob_fn: the glob function (`tf.io.gfile.glob` for remote paths).
        exists_fn: checks a plain path; `None` passes plain paths through
            unchecked.

    Raises:
        NoMatchingFileError: a glob matching nothing or a missing file.
    """
    if is_glob(pattern):
        matches = sorted(glob_fn(pattern))
        if not matches:
            raise NoMatchingFileError(
                f"{what}: pattern {pattern!r} matches no file."
            )
        return matches
    if exists_fn is not None and not exists_fn(pattern):
        raise NoMatchingFileError(f"{what}: file {pattern!r} not found.")
    return [pattern]


def expand_patterns(
    patterns, what, glob_fn=glob.glob, exists_fn=os.path.exists
):
    """`expand_pattern` over `split_patterns(patterns)`, concatenated.

    Example:
    >>> expand_patterns("a.txt,corpus/*.gz", "--input")  # doctest: +SKIP
    ['a.txt', 'corpus/part-0.gz', 'corpus/part-1.gz']
    """
    return [
        path
        for pattern in split_patterns(patterns)
        for path in expand_pattern(pattern, what, glob_fn, exists_fn)
    ]
