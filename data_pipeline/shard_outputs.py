"""The output directory of a shard build: checked before the build, cleared
of an older run's files only once the new shards are complete, and the
manifest entries of the new shards."""

import os
import shutil

from data_pipeline import corpus
from data_pipeline import manifest as manifest_lib
from tupe_tf.utils import fileio

# Work directory of a Beam run inside `output_dir` (see `beam_shards`).
BEAM_WORK_DIR_PREFIX = ".beam-shards-"


def _is_leftover(name):
    """A temporary of a run that was killed: a hidden shard or manifest
    temporary, or a Beam work directory."""
    if name.startswith(BEAM_WORK_DIR_PREFIX):
        return True
    return fileio.is_hidden_temporary(name) and (
        ".tfrecord" in name or name.startswith("." + manifest_lib.MANIFEST_NAME)
    )


def check_output_dir(output_dir, overwrite):
    """Refuses an `output_dir` that is a file, or that holds files unless
    `overwrite` (the temporaries of a killed run do not count).

    Does not create it (`shards.build_shards` does, and removes it again if
    the build fails).

    Raises:
      fileio.OutputError (a `UserError`): naming `output_dir` and what to do.

    Example:
    >>> check_output_dir("shards", overwrite=False)  # doctest: +SKIP
    """
    if not os.path.lexists(output_dir):
        return
    if not os.path.isdir(output_dir):
        raise fileio.OutputError(
            f"--output_dir {output_dir} exists and is not a directory."
        )
    names = sorted(n for n in os.listdir(output_dir) if not _is_leftover(n))
    if names and not overwrite:
        raise fileio.OutputError(
            f"--output_dir {output_dir} already holds {len(names)} file(s) "
            f"({corpus.describe_files(names)}); pass --overwrite "
            "(ShardConfig.overwrite=True) to replace its shards and manifest, "
            "or choose a new --output_dir."
        )


def remove_previous_outputs(output_dir, keep):
    """Deletes an older run's manifest (first) and shards, and the
    temporaries of killed runs, except the names in `keep`."""
    manifest_path = os.path.join(output_dir, manifest_lib.MANIFEST_NAME)
    if os.path.exists(manifest_path):
        os.remove(manifest_path)
    for name in os.listdir(output_dir):
        if name in keep:
            continue
        path = os.path.join(output_dir, name)
        if name.startswith(BEAM_WORK_DIR_PREFIX):
            shutil.rmtree(path, ignore_errors=True)
        elif _is_leftover(name) or (
            ".tfrecord" in name and not name.startswith(".")
        ):
            os.remove(path)


def shard_entries(names, tmp_paths, counts):
    """The manifest's `shards` list: `{"name", "examples", "bytes",
    "sha256"}` of each complete (still temporary) shard file."""
    return [
        {
            "name": name,
            "examples": count,
            "bytes": os.path.getsize(tmp_path),
            "sha256": fileio.file_sha256(tmp_path),
        }
        for name, tmp_path, count in zip(names, tmp_paths, counts)
    ]
