"""A resume continues the same run: the settings that decide the data.

A resumed run skips the batches already trained on by counting them, so it
continues the first run's data stream only with the same batch size,
sequence length, shards, seed, shuffle buffer and masking. These settings
are recorded in `<model_dir>/checkpoints/run.json` when a run starts from
scratch, and a run that resumes from a checkpoint with another value of one
of them is refused, naming the flag and the recorded value. Checkpoints
made without a record (by an earlier version) resume as before. The record
also keeps where the run started (`--init_from`, `init_from.initialize`'s
record, or `None` for fresh weights), which a resume reports and which its
`--init_from` may not contradict.

Example:
>>> check_or_record(run, resumed=start_step > 0)  # doctest: +SKIP
"""

import os

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
START = "init_from"


class ChangedRunError(UserError):
    """A resume with other data settings than the run's checkpoints."""


def shards_fingerprint(train_files):
    """sha256 over the training shards' sha256s (from their manifests), in
    order: the same shards in another place have the same fingerprint."""
    from data_pipeline import manifest as manifest_lib

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


def data_settings(config, train_files):
    """The record of a run: its `DATA_SETTINGS` and shards' fingerprint."""
    record = {name: getattr(config, name) for name in DATA_SETTINGS}
    record[FINGERPRINT] = shards_fingerprint(train_files)
    return record


def record_path(config):
    return os.path.join(config.checkpoint_dir, RECORD_NAME)


def changes(recorded, current):
    """`(flag, recorded, current)` of every setting that differs."""
    differences = []
    for name, value in current.items():
        if name in recorded and recorded[name] != value:
            flag = "--train_files" if name == FINGERPRINT else f"--{name}"
            differences.append((flag, recorded[name], value))
    return differences


def _describe(flag, recorded, current):
    if flag == "--train_files":
        return (
            f"--train_files hold other shards (fingerprint {current[:12]}) "
            f"than the checkpoints were trained on ({recorded[:12]})"
        )
    return f"{flag}={current} (the checkpoints were made with {recorded})"


def check_or_record(run, resumed, chief=True, start=None):
    """Refuses a resume that changes the data; records a new run's.

    Args:
        run: a `tupe_tf.training.pretrain.PretrainingRun`.
        resumed: whether the model was restored from a checkpoint.
        chief: whether this worker writes the record.
        start: for a new run, where its weights came from (the record of
            `init_from.initialize`, or `None`).

    Returns:
        Where the run started: `start` for a new run, the recorded start
        for a resume (`None` for a record without one).

    Raises:
        ChangedRunError: naming each changed flag and its recorded value,
            or an `--init_from` other than the run's start.
    """
    config = run.config
    current = data_settings(config, run.train_files)
    path = record_path(config)
    if not resumed:
        if chief:
            fileio.write_json_atomically(path, dict(current, **{START: start}))
        return start
    if not os.path.exists(path):
        return None  # Checkpoints made before runs were recorded.
    recorded = fileio.read_json(
        path, "restore it, or pass a new --model_dir to start a new run."
    )
    differences = changes(recorded, current)
    if differences:
        listing = "; ".join(_describe(*change) for change in differences)
        restore = [
            f"{flag}={recorded_value}"
            for flag, recorded_value, _ in differences
            if flag != "--train_files"
        ]
        if any(flag == "--train_files" for flag, _, _ in differences):
            restore.append("the first run's --train_files")
        raise ChangedRunError(
            f"--model_dir={config.model_dir!r} holds checkpoints of a run "
            f"with other data settings: {listing} (recorded in {path}). "
            "Resuming would feed the next steps other data than that run "
            f"would have seen. To resume, rerun with {' and '.join(restore)}; "
            "to start a new run with these settings, use a new --model_dir "
            f"(with --init_from={_preset_of(config)} to start from this "
            "run's weights)."
        )
    _check_start(config, recorded.get(START), path)
    return recorded.get(START)


def _preset_of(config):
    return os.path.join(config.model_dir, "preset")


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
