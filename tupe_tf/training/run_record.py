"""The one record of a pre-training run, and what a resume may change.

`<model_dir>/checkpoints/run.json` holds the run's `PretrainConfig`, the
training shards' fingerprint and where its weights started (`--init_from`,
`init_from.initialize`'s record, or `None` for fresh weights). A new run
writes it; a resume is checked against it and rewrites it.

A resume may change the length, the learning-rate schedule and the
intervals (docs/training.md), not the `FIXED` settings: it skips the
batches already trained on by counting them, which continues the data
stream only with the same `DATA_SETTINGS` and shards, and the checkpoints
hold the state of the recorded `--optimizer`. Nor may its `--init_from`
contradict the recorded start. Checkpoints without a record resume as
they are.

Example:
>>> check_or_record(run, resumed=start_step > 0)  # doctest: +SKIP
"""

import os

from data_pipeline import manifest as manifest_lib
from tupe_tf.utils import fileio
from tupe_tf.utils.errors import UserError

RECORD_NAME = "run.json"

# The settings of a `PretrainConfig` that decide what data a step sees.
DATA_SETTINGS = (
    "global_batch_size",
    "seq_length",
    "seed",
    "shuffle_buffer",
    "mask_rate",
    "max_predictions_per_seq",
    "whole_word_masking",
)
FINGERPRINT = "train_files_fingerprint"
START = "started_from"

# What a resume may not change: {flag: where the record keeps it}.
FIXED = {
    **{f"--{name}": (name,) for name in DATA_SETTINGS},
    "--train_files": (FINGERPRINT,),
    "--optimizer": ("optimizer", "algorithm"),
}


class ChangedRunError(UserError):
    """A resume with other data settings or another optimizer than the
    run's checkpoints."""


def shards_fingerprint(train_files):
    """sha256 over the training shards' sha256s (from their manifests), in
    order: the same shards in another place have the same fingerprint."""
    manifests = {}
    digests = []
    for path in train_files:
        directory = os.path.dirname(os.path.abspath(path))
        if directory not in manifests:
            manifest = manifest_lib.read_manifest(directory)
            manifests[directory] = {
                shard["name"]: shard["sha256"] for shard in manifest["shards"]
            }
        digests.append(manifests[directory][os.path.basename(path)])
    return fileio.sha256_hex("\n".join(digests).encode())


def record_path(config):
    return os.path.join(config.checkpoint_dir, RECORD_NAME)


def _lookup(record, keys):
    for key in keys:
        if not isinstance(record, dict) or key not in record:
            return KeyError  # Not in an older record: not compared.
        record = record[key]
    return record


def changes(recorded, current):
    """`(flag, recorded, current)` of every `FIXED` setting that differs."""
    differences = []
    for flag, keys in FIXED.items():
        old, new = _lookup(recorded, keys), _lookup(current, keys)
        if old is not KeyError and old != new:
            differences.append((flag, old, new))
    return differences


def _describe(flag, recorded, current):
    if flag == "--train_files":
        return (
            f"--train_files hold other shards (fingerprint {current[:12]}) "
            f"than the checkpoints were trained on ({recorded[:12]})"
        )
    return f"{flag}={current} (the checkpoints were made with {recorded})"


def _refusal(config, differences, path):
    """The `ChangedRunError` naming each change and how to resume."""
    listing = "; ".join(_describe(*change) for change in differences)
    restore = [
        f"{flag}={recorded}"
        for flag, recorded, _ in differences
        if flag != "--train_files"
    ]
    flags = [flag for flag, _, _ in differences]
    if "--train_files" in flags:
        restore.append("the first run's --train_files")
    if flags == ["--optimizer"]:
        what, why = "another optimizer", "Their optimizer state is that one's."
    else:
        what = "other data settings"
        why = (
            "Resuming would feed the next steps other data than that run "
            "would have seen."
        )
    return ChangedRunError(
        f"--model_dir={config.model_dir!r} holds checkpoints of a run "
        f"with {what}: {listing} (recorded in {path}). {why} To resume, "
        f"rerun with {' and '.join(restore)}; to start a new run with these "
        "settings, use a new --model_dir (with "
        f"--init_from={os.path.join(config.model_dir, 'preset')} to start "
        "from this run's weights)."
    )


def check_or_record(run, resumed, chief=True, start=None):
    """Records a new run; checks a resume against the record.

    Args:
        run: a `tupe_tf.training.pretrain.PretrainingRun`.
        resumed: whether the model was restored from a checkpoint.
        chief: whether this worker writes the record.
        start: for a new run, where its weights came from (the record of
            `init_from.initialize`, or `None`).

    Returns:
        Where the run started: `start` for a new run, the recorded start
        for a resume (`None` without a record).

    Raises:
        ChangedRunError: naming each changed flag and its recorded value,
            or an `--init_from` other than the run's start.
    """
    config = run.config
    path = record_path(config)
    current = config.to_dict()
    current[FINGERPRINT] = shards_fingerprint(run.train_files)
    if resumed:
        if not fileio.exists(path):
            return None  # Checkpoints made before runs were recorded.
        recorded = fileio.read_json(
            path, "restore it, or pass a new --model_dir to start a new run."
        )
        differences = changes(recorded, current)
        if differences:
            raise _refusal(config, differences, path)
        start = recorded.get(START)
        _check_start(config, start, path)
    if chief:
        current[START] = start
        fileio.write_json_atomically(path, current, default=str)
    return start


def _check_start(config, start, path):
    """Refuses an `--init_from` that the resumed run did not start from."""
    if not config.init_from:
        return
    preset = start["preset"] if start else None
    if preset == os.path.abspath(config.init_from):
        return
    began = f"from {preset}" if preset else "from fresh weights"
    again = f"--init_from={preset}" if preset else "without --init_from"
    raise ChangedRunError(
        f"--model_dir={config.model_dir!r} holds checkpoints of a run that "
        f"started {began} (recorded in {path}), so a rerun resumes from "
        f"them and would not read --init_from={config.init_from!r}. To "
        f"resume, rerun with {again}; to start a new run from "
        f"{config.init_from!r}, use a new --model_dir."
    )
