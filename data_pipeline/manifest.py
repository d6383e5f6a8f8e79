"""`manifest.json`: what a shard directory holds, written last, atomically."""

import importlib.util
import json
import os

from tupe_tf.utils import fileio

MANIFEST_NAME = "manifest.json"
MANIFEST_FORMAT = "tupe_tf.pretraining_shards"
MANIFEST_FORMAT_VERSION = 1

SCHEMA_DYNAMIC = "dynamic"
SCHEMA_STATIC = "static"

# Feature names of each schema. The static one is TF Model Garden's
# (`official/nlp/data/create_pretraining_data.py`).
DYNAMIC_FEATURES = ("input_word_ids",)
STATIC_FEATURES = (
    "input_ids",
    "input_mask",
    "segment_ids",
    "masked_lm_positions",
    "masked_lm_ids",
    "masked_lm_weights",
    "next_sentence_labels",
)


def package_version():
    """The tupe-tf version, read from `tupe_tf/version.py` alone.

    `import tupe_tf.version` would run `tupe_tf/__init__.py`, which imports the
    whole model stack (keras-hub, seconds of start-up); so the file is loaded
    on its own.
    """
    spec = importlib.util.find_spec("tupe_tf")  # Does not run __init__.py.
    if spec is None or not spec.submodule_search_locations:
        return "unknown"
    path = os.path.join(list(spec.submodule_search_locations)[0], "version.py")
    version_spec = importlib.util.spec_from_file_location(
        "_tupe_tf_version", path
    )
    module = importlib.util.module_from_spec(version_spec)
    version_spec.loader.exec_module(module)
    return module.__version__


def write_manifest(directory, manifest):
    """Writes `directory/manifest.json` atomically (temporary file + rename)."""
    path = os.path.join(directory, MANIFEST_NAME)
    fileio.write_text_atomically(
        path, json.dumps(manifest, indent=2, sort_keys=True) + "\n"
    )
    return path


def read_manifest(directory):
    """Reads and checks the manifest of a shard directory.

    Args:
      directory: a shard directory (or the path of its `manifest.json`).

    Returns:
      The manifest as a dict; see `docs/data_pipeline.md` for the fields.

    Raises:
      FileNotFoundError: if there is no manifest (e.g. an interrupted run).
      ValueError: if it is not valid JSON or not a tupe-tf shard manifest.

    Example:
    >>> m = read_manifest("shards/")  # doctest: +SKIP
    >>> m["max_seq_length"], m["schema"]  # doctest: +SKIP
    (128, 'dynamic')
    """
    directory = os.fspath(directory)
    path = (
        directory
        if os.path.basename(directory) == MANIFEST_NAME
        else os.path.join(directory, MANIFEST_NAME)
    )
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"No {MANIFEST_NAME} in {os.path.dirname(path) or '.'}: not a "
            "complete shard directory (build_shards writes it last, so an "
            "interrupted run has none)."
        )
    try:
        with open(path, encoding="utf-8") as f:
            manifest = json.load(f)
    except (ValueError, UnicodeDecodeError) as e:
        raise ValueError(f"Manifest {path} is not valid JSON: {e}") from e
    if (
        not isinstance(manifest, dict)
        or manifest.get("format") != MANIFEST_FORMAT
    ):
        raise ValueError(f"{path} is not a {MANIFEST_FORMAT} manifest.")
    if manifest.get("format_version") != MANIFEST_FORMAT_VERSION:
        raise ValueError(
            f"Manifest {path} has format_version "
            f"{manifest.get('format_version')!r}; this reader knows "
            f"{MANIFEST_FORMAT_VERSION}."
        )
    for field in (
        "vocab",
        "schema",
        "max_seq_length",
        "shards",
        "compression",
        "lowercase",
    ):
        if field not in manifest:
            raise ValueError(f"Manifest {path} has no field {field!r}.")
    if manifest["schema"] not in (SCHEMA_DYNAMIC, SCHEMA_STATIC):
        raise ValueError(
            f"Manifest {path} has unknown schema {manifest['schema']!r}."
        )
    manifest["_path"] = path
    return manifest
