"""Validation of local preset directories before loading them."""

import json
import os

from tupe_tf.utils.errors import UserError
from tupe_tf.version import __version__

REQUIRED_PRESET_FILES = ("config.json", "metadata.json", "model.weights.h5")


def check_preset(preset_dir):
    """Checks that `preset_dir` is a complete preset of this tupe-tf version.

    Args:
        preset_dir: path of a directory written by `save_to_preset`.

    Returns:
        The preset's `metadata.json` as a dict.

    Raises:
        UserError: (a `ValueError`) naming the directory and what is
            wrong: missing directory or file, a JSON or weights file that
            cannot be read (truncated, overwritten), not a tupe-tf preset,
            or a preset saved by another major.minor version of tupe-tf.

    Example:
    ```python
    metadata = tupe_tf.check_preset("runs/default/preset")
    ```
    """
    if not os.path.isdir(preset_dir):
        raise UserError(f"Preset directory {preset_dir!r} does not exist.")
    refuse_missing_files(
        preset_dir,
        REQUIRED_PRESET_FILES,
        "is incomplete",
        "Re-export it with `save_to_preset`.",
    )
    for name in sorted(os.listdir(preset_dir)):
        if name.endswith(".json"):
            read_preset_json(preset_dir, name)
    _check_weights_file(preset_dir)
    metadata = read_preset_json(preset_dir, "metadata.json")
    version = metadata.get("tupe_tf_version")
    if version is None:
        raise UserError(
            f"Preset {preset_dir!r} was not saved by tupe-tf (no "
            "`tupe_tf_version` in metadata.json)."
        )
    if version.split(".")[:2] != __version__.split(".")[:2]:
        raise UserError(
            f"Preset {preset_dir!r} was saved by tupe-tf {version}; this is "
            f"tupe-tf {__version__}. Load it with a matching version."
        )
    return metadata


def refuse_missing_files(preset_dir, names, problem, advice):
    """Refuses a preset that lacks any of the files `names`.

    Raises:
        UserError: `Preset '<dir>' <problem>: missing [...]. <advice>`.
    """
    missing = [
        name
        for name in names
        if not os.path.exists(os.path.join(preset_dir, name))
    ]
    if missing:
        raise UserError(
            f"Preset {preset_dir!r} {problem}: missing {missing}. {advice}"
        )


def _damaged(preset_dir, name, error):
    return UserError(
        f"Preset {preset_dir!r} is damaged: {name} cannot be read ({error}). "
        "Save the preset again (or copy it again from where it was saved)."
    )


def read_preset_json(preset_dir, name):
    """The JSON file `name` of a preset, or `UserError` naming it.

    Args:
        preset_dir: the preset directory.
        name: e.g. `config.json`.

    Returns:
        The parsed JSON.

    Raises:
        UserError: the file is missing, truncated or not JSON.

    Example:
    ```python
    config = read_preset_json("runs/default/preset", "config.json")
    ```
    """
    try:
        with open(os.path.join(preset_dir, name), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as error:
        raise _damaged(preset_dir, name, error) from error


def _check_weights_file(preset_dir):
    # Opening the HDF5 file reads its superblock and end-of-file address:
    # a truncated or overwritten weights file fails here, before any model
    # is built. (h5py comes with Keras.)
    import h5py

    name = "model.weights.h5"
    try:
        with h5py.File(os.path.join(preset_dir, name), "r") as weights:
            list(weights.keys())
    except (OSError, ValueError) as error:
        raise _damaged(preset_dir, name, error) from error
