"""The study's results directory: one JSON file per finished run.

`<study_results_dir>/study.json` holds the settings every run shares and
`data.json` the fingerprint of the data they were trained on; a run that
would mix with runs of other settings or data is refused before it starts.

Example:

>>> from tupe_tf.analysis.study_config import CompareConfig
>>> pretrain, finetune = load_results(CompareConfig())  # doctest: +SKIP
"""

import json
import os

from tupe_tf.utils import fileio
from tupe_tf.utils.errors import UserError


def write_text(path, text):
    """Writes `text` to `path` atomically, creating its directory."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fileio.write_text_atomically(path, text)


def write_json(path, obj):
    """Writes one record of the study (sorted keys, one-space indent)."""
    write_text(path, json.dumps(obj, indent=1, sort_keys=True) + "\n")


def read_json(path):
    """A record of the study, or `UserError` naming the damaged file."""
    return fileio.read_json(
        path,
        "restore it from where the study's results are kept, or move it "
        "aside to run it again.",
    )


def check_study_settings(config):
    """Writes `study.json`, or refuses settings that differ from it."""
    path = os.path.join(config.study_results_dir, "study.json")
    settings = json.loads(json.dumps(config.study_settings()))
    if not os.path.isfile(path):
        write_json(path, settings)
        return
    saved = read_json(path)
    if saved != settings:
        changed = sorted(
            k
            for k in set(saved) | set(settings)
            if saved.get(k) != settings.get(k)
        )
        raise UserError(
            f"{path} was written with other settings ({changed}); its "
            "runs cannot be mixed with these. Use another --results_dir "
            "or the saved values."
        )


def check_study_data(config, data):
    """Writes `data.json`, or refuses data that differ from its runs' data.

    The fingerprint covers the vocabulary and every shard, so a changed
    corpus, split or vocabulary learner is caught before any run mixes
    with runs trained on the old data.
    """
    path = os.path.join(config.study_results_dir, "data.json")
    if not os.path.isfile(path):
        write_json(
            path,
            {
                "fingerprint": data.fingerprint,
                "unigram_loss": data.unigram_loss,
                "stats": data.stats,
            },
        )
        return
    saved = read_json(path)
    if saved.get("fingerprint") != data.fingerprint:
        raise UserError(
            f"The study's data changed: {path} records the data its "
            f"runs were trained on ({str(saved.get('fingerprint'))[:12]}), "
            f"the data under --work_dir={config.pretrain.work_dir} is "
            f"{data.fingerprint[:12]} (another corpus, split or "
            "vocabulary learner). Runs on different data cannot be "
            "mixed: move the study's results aside to start it again."
        )


def load_kind(config, kind):
    """The finished-run dicts of one kind (`<study_results_dir>/<kind>/`),
    by file name."""
    directory = os.path.join(config.study_results_dir, kind)
    if not os.path.isdir(directory):
        return []
    return [
        read_json(os.path.join(directory, name))
        for name in sorted(os.listdir(directory))
        if name.endswith(".json")
    ]


def validation_curve(results, interval):
    """`{"steps", "val_loss"}` of a `run_pretraining` results dict that
    evaluated every `interval` steps."""
    losses = [float(v) for v in results["history_this_run"].get("val_loss", [])]
    return {
        "steps": [interval * (i + 1) for i in range(len(losses))],
        "val_loss": losses,
    }


def selection_fraction(record):
    """A fine-tuning record's `--selection_fraction`; `None` for the records
    from before selection splits (trained on the whole training file, the
    evaluation file scored after every epoch and any rate chosen on it)."""
    return record.get("selection_fraction")


def _selection_protocols(finetune):
    return {selection_fraction(r) for r in finetune}


def check_glue_selection(config):
    """Refuses fine-tuning runs that would mix with records of another
    selection split (or of none) before they start."""
    on_record = _selection_protocols(load_kind(config, "finetune"))
    wanted = config.finetune.selection_fraction
    if on_record - {wanted}:
        raise UserError(
            f"The fine-tuning records under {config.study_results_dir} "
            f"have selection fraction {sorted(map(str, on_record))} (None: "
            "written before selection splits, trained on the whole "
            "training file); runs with --selection_fraction="
            f"{wanted} cannot be mixed with them. Use another --results_dir."
        )


def load_results(config):
    """`(pretrain, finetune)` lists of the study's finished-run dicts."""
    pretrain, finetune = (
        load_kind(config, "pretrain"),
        load_kind(config, "finetune"),
    )
    fingerprints = {run.get("data_fingerprint") for run in pretrain + finetune}
    if len(fingerprints) > 1:
        raise UserError(
            f"The runs under {config.study_results_dir} were trained on "
            f"different data (fingerprints {sorted(map(str, fingerprints))}): "
            "move the runs of the old data aside."
        )
    if len(_selection_protocols(finetune)) > 1:
        raise UserError(
            f"The fine-tuning runs under {config.study_results_dir} mix "
            "selection fractions "
            f"{sorted(map(str, _selection_protocols(finetune)))} (None: "
            "before selection splits): move the runs of one aside."
        )
    return pretrain, finetune
