"""`manifest.json`: what a shard directory holds, written last, atomically."""

import dataclasses
import importlib.util
import json
import os

from absl import logging

from data_pipeline import shard_config
from tupe_tf.utils import fileio
from tupe_tf.utils.errors import UserError

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


def shard_manifest(
    config,
    vocabulary,
    input_files,
    shard_entries,
    corpus_stats,
    packing_stats,
    unk_count,
    engine,
    num_partitions,
):
    """The manifest dict of a finished build (logs its warnings too).

    Args:
      config: the `ShardConfig`.
      vocabulary: the `vocab.Vocabulary`.
      input_files: the resolved input files.
      shard_entries: `{"name", "examples", "bytes", "sha256"}` per shard.
      corpus_stats: `corpus.CorpusStats` of the input.
      packing_stats: `packing.PackingStats` (summed over partitions).
      unk_count: `[UNK]` tokens in the text.
      engine: `shards.ENGINE_SINGLE_PROCESS` or `"beam:<runner>"`.
      num_partitions: how many partitions were packed separately.

    Example:
    >>> write_manifest("shards", shard_manifest(config, vocab, files,
    ...     entries, corpus_stats, packer.stats, unk_count,
    ...     engine="single_process", num_partitions=1))  # doctest: +SKIP
    """
    _log_warnings(corpus_stats, packing_stats, unk_count, vocabulary)
    return {
        "format": MANIFEST_FORMAT,
        "format_version": MANIFEST_FORMAT_VERSION,
        "package_version": package_version(),
        "vocab": {
            "file": os.path.basename(vocabulary.path),
            "sha256": vocabulary.sha256,
            "size": vocabulary.size,
            "special_token_ids": dataclasses.asdict(vocabulary.special_ids),
        },
        "lowercase": bool(config.lowercase),
        "tokenizer": "tensorflow_text.FastBertTokenizer",
        "packing": "full_sentences",
        "max_seq_length": config.max_seq_length,
        "schema": SCHEMA_STATIC if config.static_masking else SCHEMA_DYNAMIC,
        "features": list(
            STATIC_FEATURES if config.static_masking else DYNAMIC_FEATURES
        ),
        "static_masking": _static_masking_entry(config),
        "compression": config.tf_compression,
        "seed": config.seed,
        "num_examples": sum(s["examples"] for s in shard_entries),
        "engine": engine,
        "num_partitions": num_partitions,
        "shards": shard_entries,
        "sources": [
            {"path": p, "bytes": os.path.getsize(p)} for p in input_files
        ],
        "stats": _stats_entry(config, corpus_stats, packing_stats, unk_count),
    }


def _log_warnings(corpus_stats, packing_stats, unk_count, vocabulary):
    """Warns of replaced undecodable lines and of many `[UNK]` tokens."""
    if corpus_stats.invalid_utf8_lines:
        logging.warning(
            "%d line(s) had bytes that are not UTF-8; they were replaced with "
            "U+FFFD.",
            corpus_stats.invalid_utf8_lines,
        )
    text_tokens = packing_stats.text_tokens
    unk_rate = unk_count / text_tokens if text_tokens else 0.0
    if unk_rate > shard_config.DEFAULT_MAX_UNK_FRACTION:
        logging.warning(
            "%.1f%% of tokens are [UNK]: does --lowercase match the vocabulary "
            "%s?",
            100 * unk_rate,
            vocabulary.path,
        )


def _static_masking_entry(config):
    if not config.static_masking:
        return None
    entry = {
        "dupe_factor": config.dupe_factor,
        "max_predictions_per_seq": config.max_predictions_per_seq,
        "mask_rate": config.mask_rate,
    }
    if config.whole_word_masking:
        # Only when set: manifests of per-token masking stay as they were.
        entry["whole_word_masking"] = True
    return entry


def _stats_entry(config, corpus_stats, packing_stats, unk_count):
    return {
        "corpus": dataclasses.asdict(corpus_stats),
        "sequences": packing_stats.sequences,
        "tokens": packing_stats.tokens,
        "text_tokens": packing_stats.text_tokens,
        "unk_tokens": unk_count,
        "documents": packing_stats.documents,
        "sentences": packing_stats.sentences,
        "split_sentences": packing_stats.split_sentences,
        "fill_ratio": round(packing_stats.fill_ratio(config.max_seq_length), 6),
    }


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
      fileio.NoMatchingFileError (a `UserError` and `FileNotFoundError`):
        there is no manifest (e.g. an interrupted run).
      UserError: it cannot be read, is not valid JSON or not a tupe-tf
        shard manifest.

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
        raise fileio.NoMatchingFileError(
            f"No {MANIFEST_NAME} in {os.path.dirname(path) or '.'}: not a "
            "complete shard directory (build_shards writes it last, so an "
            "interrupted run has none)."
        )
    try:
        with open(path, encoding="utf-8") as f:
            manifest = json.load(f)
    except (ValueError, UnicodeDecodeError) as e:
        raise UserError(f"Manifest {path} is not valid JSON: {e}") from e
    except OSError as e:
        raise UserError(
            f"Manifest {path} cannot be read: {e.strerror or e}."
        ) from e
    if (
        not isinstance(manifest, dict)
        or manifest.get("format") != MANIFEST_FORMAT
    ):
        raise UserError(f"{path} is not a {MANIFEST_FORMAT} manifest.")
    if manifest.get("format_version") != MANIFEST_FORMAT_VERSION:
        raise UserError(
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
            raise UserError(f"Manifest {path} has no field {field!r}.")
    if manifest["schema"] not in (SCHEMA_DYNAMIC, SCHEMA_STATIC):
        raise UserError(
            f"Manifest {path} has unknown schema {manifest['schema']!r}."
        )
    manifest["_path"] = path
    return manifest
