"""The URL side of `fileio`: paths with a scheme (`gs://bucket/run`,
`ram://x`, any scheme `tf.io.gfile` serves), read and written through
`tf.io.gfile`.

`fileio` writes every output into a local temporary first; for a URL it
hands the finished file or directory to `publish_url`, which uploads it
beside its URL and renames it into place. A remote file system offers
less than a local one: its renames are only as atomic as its own (on GCS
a file is replaced whole, a directory object by object), which the
docstrings of `publish_url`, `fileio.atomic_files` and
`fileio.atomic_directory` spell out.

The helpers that take any path (`absolute_path`, `exists`,
`remove_tree`, `open_text`) keep the local file system's calls for a
local path. TensorFlow is imported only for a URL, so that importing this
module (through `fileio`, as `scripts/build_shards.py` does at start-up)
never loads it.
"""

import contextlib
import os
import secrets
import shutil

from tupe_tf.utils.errors import OutputError

# The suffix of a hidden temporary file, `.<name>.<random>.tmp`: the local
# ones of `fileio.atomic_files` and the uploads `publish_url` stages
# beside a URL alike (`fileio.is_hidden_temporary`).
TMP_SUFFIX = ".tmp"


def is_url(path):
    """Whether `path` is a URL (`gs://bucket/x`, `ram://x`): a path that
    `tf.io.gfile` writes, not the local file system's calls.

    Example:
    >>> is_url("gs://bucket/run"), is_url("runs/default")
    (True, False)
    """
    return "://" in os.fspath(path)


def absolute_path(path):
    """`os.path.abspath(path)`; a URL as it is (`abspath` would make
    `gs://b/x` the local `<cwd>/gs:/b/x`).

    Example:
    >>> absolute_path("gs://bucket/run")
    'gs://bucket/run'
    """
    path = os.fspath(path)
    return path if is_url(path) else os.path.abspath(path)


def _gfile():
    """`tf.io.gfile`, imported only for URLs (importing this module must
    not load TensorFlow)."""
    import tensorflow as tf

    return tf.io.gfile


def gfile_errors(path):
    """The exceptions `tf.io.gfile` raises for `path`: none for a local
    path (its calls raise `OSError`)."""
    if not is_url(path):
        return ()
    import tensorflow as tf

    return (tf.errors.OpError,)


def exists(path):
    """Whether the file or directory `path` (a URL too) exists."""
    if is_url(path):
        return _gfile().exists(os.fspath(path))
    return os.path.exists(path)


def remove_tree(path):
    """Removes the directory `path` (a URL too) with its content, if it
    exists; errors are ignored, as in `shutil.rmtree(ignore_errors=True)`.
    """
    if not is_url(path):
        shutil.rmtree(path, ignore_errors=True)
        return
    with contextlib.suppress(*gfile_errors(path)):
        _gfile().rmtree(os.fspath(path))


def open_text(path):
    """`path` (a URL too) opened to read UTF-8 text."""
    if is_url(path):
        return _gfile().GFile(path, "r")
    return open(path, encoding="utf-8")  # noqa: SIM115


def check_scheme(path, flag):
    """Refuses a URL whose scheme `tf.io.gfile` has no file system for
    (`foo://x`; `s3://` without a plugin), naming `flag`, before anything
    is written; a local path passes (TensorFlow is imported only for a
    URL).

    Raises:
        OutputError: `<flag>='<url>': TensorFlow has no file system for
            <scheme>:// ...`, listing the schemes it has.

    Example:
    >>> check_scheme("foo://bucket/run", "--model_dir")  # doctest: +SKIP
    OutputError: --model_dir='foo://bucket/run': TensorFlow has no file ...
    """
    path = os.fspath(path)
    if not is_url(path):
        return
    import tensorflow as tf

    scheme = path.split("://", 1)[0]
    served = tf.io.gfile.get_registered_schemes()
    if scheme in served:
        return
    urls = ", ".join(f"{s}://" for s in sorted(served) if s not in ("", "file"))
    raise OutputError(
        f"{flag}={path!r}: TensorFlow has no file system for {scheme}:// "
        f"here (it has local paths and {urls}). Pass a local directory or a "
        "URL of one of those."
    )


def remote_write_probe(directory):
    """`fileio`'s write test through `tf.io.gfile`, creating `directory`
    first, for a URL (`gs://...`): a hidden file written and removed;
    `OSError` if it fails."""
    import tensorflow as tf  # Only remote paths need it.

    probe = f"{directory.rstrip('/')}/.write-test-{secrets.token_hex(8)}"
    try:
        tf.io.gfile.makedirs(directory)
        with tf.io.gfile.GFile(probe, "w") as f:
            f.write("ok")
        tf.io.gfile.remove(probe)
    except tf.errors.OpError as error:
        raise OSError(error.message) from error


def _upload(gfile, local_path, url):
    """Copies the file or directory tree `local_path` to `url`."""
    if not os.path.isdir(local_path):
        gfile.copy(local_path, url, overwrite=True)
        return
    gfile.makedirs(url)
    for name in os.listdir(local_path):
        _upload(gfile, os.path.join(local_path, name), f"{url}/{name}")


def publish_url(local_path, url):
    """Uploads the file or directory `local_path` to a hidden sibling of
    `url`, then renames it to `url` with `tf.io.gfile`.

    The upload, the slow part, happens before `url` is touched. A file is
    renamed over `url`; an existing directory is moved aside first and
    removed once the new one is in place (moved back if that fails), as
    `fileio.atomic_directory` does locally, but file by file
    (`_move_tree`). How atomic each rename is, is the file system's: on
    GCS a rename copies and deletes an object, so a file is replaced whole
    but a directory one file after another.
    """
    gfile = _gfile()
    parent, name = url.rstrip("/").rsplit("/", 1)
    token = secrets.token_hex(8)
    directory = os.path.isdir(local_path)
    staged = f"{parent}/.{name}." + (
        f"tmp-{token}" if directory else f"{token}{TMP_SUFFIX}"
    )
    try:
        gfile.makedirs(parent)
        _upload(gfile, local_path, staged)
        if directory:
            _replace_tree(gfile, staged, url, f"{parent}/.{name}.old-{token}")
        else:
            gfile.rename(staged, url, overwrite=True)
    except BaseException:
        with contextlib.suppress(*gfile_errors(url)):
            if gfile.exists(staged):
                _remove_url(gfile, staged)
        raise


def _replace_tree(gfile, staged, url, aside):
    """Moves the directory `staged` to `url`, an existing `url` moved to
    `aside` first and removed after (moved back if the move fails)."""
    moved = gfile.exists(url)
    if moved:
        _move_tree(gfile, url, aside)
    try:
        _move_tree(gfile, staged, url)
    except BaseException:
        if moved:
            if gfile.exists(url):
                _remove_url(gfile, url)
            _move_tree(gfile, aside, url)
        raise
    if moved:
        # As `shutil.rmtree(ignore_errors=True)` locally: the new directory
        # is in place, a leftover is no reason to fail.
        with contextlib.suppress(*gfile_errors(url)):
            _remove_url(gfile, aside)


def _move_tree(gfile, source, target):
    """Renames each file under the directory `source` to its place under
    `target`, then removes `source`.

    File by file, because renaming a directory is not portable: GCS
    renames each object itself, `ram://` moves the directory's own entry
    and leaves its files behind.
    """
    source = source.rstrip("/")
    for directory, _, files in gfile.walk(source):
        # Listings may end a directory with "/" (GCS): no "//" in names.
        directory = directory.rstrip("/")
        relative = directory[len(source) :].strip("/")
        into = f"{target}/{relative}" if relative else target
        gfile.makedirs(into)
        for name in files:
            target_file = f"{into}/{name}"
            gfile.rename(f"{directory}/{name}", target_file, overwrite=True)
    gfile.rmtree(source)


def _remove_url(gfile, url):
    """Removes the file or directory `url`."""
    if gfile.isdir(url):
        gfile.rmtree(url)
    else:
        gfile.remove(url)
