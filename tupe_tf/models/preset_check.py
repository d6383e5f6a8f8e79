"""Validation of local preset directories before loading them."""

import json
import os

from tupe_tf.version import __version__

REQUIRED_PRESET_FILES = ("config.json", "metadata.json", "model.weights.h5")


def check_preset(preset_dir):
    """Checks that `preset_dir` is a complete preset of this tupe-tf version.

    Args:
        preset_dir: path of a directory written by `save_to_preset`.

    Returns:
        The preset's `metadata.json` as a dict.

    Raises:
        ValueError: naming the directory and what is wrong: missing
            directory or file, not a tupe-tf preset, or a preset saved by
            another major.minor version of tupe-tf.

    Example:
    ```python
    metadata = tupe_tf.check_preset("runs/default/preset")
    ```
    """
    if not os.path.isdir(preset_dir):
        raise ValueError(f"Preset directory {preset_dir!r} does not exist.")
    missing = [
        name
        for name in REQUIRED_PRESET_FILES
        if not os.path.exists(os.path.join(preset_dir, name))
    ]
    if missing:
        raise ValueError(
            f"Preset {preset_dir!r} is incomplete: missing {missing}. "
            "Re-export it with `save_to_preset`."
        )
    with open(os.path.join(preset_dir, "metadata.json")) as metadata_file:
        metadata = json.load(metadata_file)
    version = metadata.get("tupe_tf_version")
    if version is None:
        raise ValueError(
            f"Preset {preset_dir!r} was not saved by tupe-tf (no "
            "`tupe_tf_version` in metadata.json)."
        )
    if version.split(".")[:2] != __version__.split(".")[:2]:
        raise ValueError(
            f"Preset {preset_dir!r} was saved by tupe-tf {version}; this is "
            f"tupe-tf {__version__}. Load it with a matching version."
        )
    return metadata
