"""GLUE tasks from TensorFlow Datasets or an official-layout TSV directory.

Every task gives the same thing: a `GlueSplit` of one or two lists of
sentences and a label array (class ids, or floats for STS-B), with labels
numbered as in TFDS `glue/<task>` whichever source is used.

`GLUE_TASKS` is the one table of the tasks: their files, columns, labels
and metrics. Training reads it (`GlueConfig.task`'s choices,
`tupe_tf.training.glue_metrics`).

Local layout (as written by the official `download_glue_data.py`):

    <glue_dir>/CoLA/{train,dev}.tsv      no header: source, label, _, sentence
    <glue_dir>/SST-2/{train,dev}.tsv     sentence, label
    <glue_dir>/MRPC/{train,dev}.tsv      Quality, #1 ID, #2 ID, #1 String, #2 String
    <glue_dir>/STS-B/{train,dev}.tsv     ..., sentence1, sentence2, score
    <glue_dir>/QQP/{train,dev}.tsv       id, qid1, qid2, question1, question2, is_duplicate
    <glue_dir>/MNLI/train.tsv, dev_matched.tsv, dev_mismatched.tsv
                                         ..., sentence1, sentence2, ..., gold_label
    <glue_dir>/QNLI/{train,dev}.tsv      index, question, sentence, label
    <glue_dir>/RTE/{train,dev}.tsv       index, sentence1, sentence2, label
    <glue_dir>/WNLI/{train,dev}.tsv      index, sentence1, sentence2, label
"""

import csv
import dataclasses
import os
import sys
from typing import Optional
from typing import Sequence
from typing import Tuple

import numpy as np

from tupe_tf.utils import extras
from tupe_tf.utils import fileio
from tupe_tf.utils.errors import UserError

NLI_LABELS = {"entailment": 0, "not_entailment": 1}
MNLI_LABELS = {"entailment": 0, "neutral": 1, "contradiction": 2}


@dataclasses.dataclass(frozen=True)
class GlueTask:
    """How to read one GLUE task.

    Attributes:
        name: TFDS config name (`cola`, `sst2`, ...).
        directory: the task's directory in the official layout.
        tfds_features: TFDS feature names of the text field(s).
        tsv_columns: header names of the text column(s), or indices when the
            file has no header.
        tsv_label: header name (or index) of the label column.
        label_map: maps the label string to its id; `None` for `int`, or
            `float` labels for regression.
        num_classes: classes, 1 for regression.
        eval_splits: evaluation split names (TFDS naming).
        has_header: whether the TSV files start with a header row.
        metrics: the GLUE metrics reported for the task (names of
            `tupe_tf.training.glue_metrics` functions), in report order.
        primary_metric: the one of `metrics` that picks the best learning
            rate (GLUE's convention).
    """

    name: str
    directory: str
    tfds_features: Tuple[str, ...]
    tsv_columns: Tuple[object, ...]
    tsv_label: object
    num_classes: int
    eval_splits: Tuple[str, ...] = ("validation",)
    label_map: Optional[dict] = None
    has_header: bool = True
    metrics: Tuple[str, ...] = ("accuracy",)
    primary_metric: str = "accuracy"

    @property
    def is_regression(self):
        return self.num_classes == 1


GLUE_TASKS = {
    "cola": GlueTask(
        "cola",
        "CoLA",
        ("sentence",),
        (3,),
        1,
        2,
        has_header=False,
        metrics=("matthews_corrcoef",),
        primary_metric="matthews_corrcoef",
    ),
    "sst2": GlueTask("sst2", "SST-2", ("sentence",), ("sentence",), "label", 2),
    "mrpc": GlueTask(
        "mrpc",
        "MRPC",
        ("sentence1", "sentence2"),
        ("#1 String", "#2 String"),
        "Quality",
        2,
        metrics=("accuracy", "f1"),
        primary_metric="f1",
    ),
    "stsb": GlueTask(
        "stsb",
        "STS-B",
        ("sentence1", "sentence2"),
        ("sentence1", "sentence2"),
        "score",
        1,
        metrics=("pearson", "spearman"),
        primary_metric="pearson",
    ),
    "qqp": GlueTask(
        "qqp",
        "QQP",
        ("question1", "question2"),
        ("question1", "question2"),
        "is_duplicate",
        2,
        metrics=("accuracy", "f1"),
        primary_metric="f1",
    ),
    "mnli": GlueTask(
        "mnli",
        "MNLI",
        ("premise", "hypothesis"),
        ("sentence1", "sentence2"),
        "gold_label",
        3,
        eval_splits=("validation_matched", "validation_mismatched"),
        label_map=MNLI_LABELS,
    ),
    "qnli": GlueTask(
        "qnli",
        "QNLI",
        ("question", "sentence"),
        ("question", "sentence"),
        "label",
        2,
        label_map=NLI_LABELS,
    ),
    "rte": GlueTask(
        "rte",
        "RTE",
        ("sentence1", "sentence2"),
        ("sentence1", "sentence2"),
        "label",
        2,
        label_map=NLI_LABELS,
    ),
    "wnli": GlueTask(
        "wnli",
        "WNLI",
        ("sentence1", "sentence2"),
        ("sentence1", "sentence2"),
        "label",
        2,
    ),
}

# The task names, in GLUE's order (`GlueConfig.task`'s choices).
TASK_NAMES = tuple(GLUE_TASKS)

_TSV_FILES = {
    "train": "train.tsv",
    "validation": "dev.tsv",
    "validation_matched": "dev_matched.tsv",
    "validation_mismatched": "dev_mismatched.tsv",
}

# Evaluation files known by their task and full row count, and what they
# are: a "dev.tsv" is not always GLUE's dev split (../shared/data/glue's
# SST-2 one is SST's test split, its CoLA one the out-of-domain set).
KNOWN_EVAL_FILES = {
    ("sst2", 872): "GLUE's SST-2 dev split",
    ("sst2", 1821): "SST's test split, not GLUE's 872-sentence SST-2 dev",
    ("cola", 1043): "GLUE's CoLA dev split (in-domain and out-of-domain)",
    ("cola", 516): "CoLA's out-of-domain dev set, not GLUE's "
    "1,043-sentence CoLA dev",
    ("cola", 527): "CoLA's in-domain dev set, not GLUE's 1,043-sentence "
    "CoLA dev",
}

# The selection split is carved from the training file with this seed:
# the same rows for every run, rate and model.
SELECTION_SEED = 0
# Regression scores (STS-B) are stratified by this many quantile bins.
SELECTION_REGRESSION_BINS = 5


@dataclasses.dataclass
class GlueSplit:
    """One split of a GLUE task.

    Attributes:
        task: the `GlueTask`.
        split: split name (`train`, `validation`, `validation_matched`, ...).
        sentences: one list of strings per text field (1 or 2 lists).
        labels: `int32` class ids, or `float32` scores for STS-B.
        source: the TSV path or `tfds:glue/<task>`.
    """

    task: GlueTask
    split: str
    sentences: Sequence[Sequence[str]]
    labels: np.ndarray
    source: str

    def __len__(self):
        return len(self.labels)


def get_task(name):
    """The `GlueTask` for a name such as `sst2`, `SST-2` or `mnli`."""
    key = name.lower().replace("-", "").replace("_", "")
    if key not in GLUE_TASKS:
        raise UserError(
            f"--task={name!r} is not a GLUE task; choose from {sorted(GLUE_TASKS)}."
        )
    return GLUE_TASKS[key]


def _parse_label(task, raw, path, line_number):
    raw = raw.strip()
    try:
        if task.is_regression:
            return float(raw)
        if task.label_map is not None:
            return task.label_map[raw]
        value = int(raw)
    except (KeyError, ValueError):
        expected = (
            "a number"
            if task.is_regression
            else sorted(task.label_map)
            if task.label_map
            else f"an integer in [0, {task.num_classes})"
        )
        raise UserError(
            f"{path}:{line_number}: label column {task.tsv_label!r} holds "
            f"{raw!r}, expected {expected}."
        ) from None
    if not 0 <= value < task.num_classes:
        raise UserError(
            f"{path}:{line_number}: label {value} is outside [0, {task.num_classes})."
        )
    return value


def read_glue_tsv(task, split, glue_dir, max_examples=None):
    """Reads a split from the official GLUE TSV layout.

    Args:
        task: a `GlueTask` or its name.
        split: `train`, `validation`, or for MNLI `validation_matched` /
            `validation_mismatched`.
        glue_dir: the directory holding `CoLA/`, `SST-2/`, ...
        max_examples: keep only the first this many examples.

    Returns:
        A `GlueSplit`.

    Raises:
        fileio.NoMatchingFileError (a `UserError` and `FileNotFoundError`):
            the TSV file is missing (its path is named).
        UserError: the file cannot be read or is not UTF-8 text (`glue_dir`
            named), a missing column or a bad label (file and line named).

    Example:

    >>> split = read_glue_tsv("sst2", "validation", "../shared/data/glue")
    >>> split.sentences[0][0], int(split.labels[0])
    ('no movement , no yuks , not much of anything', 0)
    """
    task = get_task(task) if isinstance(task, str) else task
    split = _check_split(task, split)
    path = os.path.join(glue_dir, task.directory, _TSV_FILES[split])
    if not os.path.isfile(path):
        raise fileio.NoMatchingFileError(
            f"GLUE {task.name} {split}: {path} does not exist (--glue_dir="
            f"{glue_dir!r} must hold the official layout: {task.directory}/"
            f"{_TSV_FILES[split]})."
        )
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    try:
        with open(path, encoding="utf-8", newline="") as f:
            texts, labels = _read_rows(task, path, f, max_examples)
    except UnicodeDecodeError as e:
        raise UserError(
            f"--glue_dir={glue_dir!r}: the GLUE {task.name} {split} file is "
            f"not UTF-8 text ({e}). Pass the official TSV files."
        ) from e
    except (OSError, csv.Error) as e:
        raise UserError(f"Cannot read GLUE file {path}: {e}") from e
    if not labels:
        raise UserError(f"{path} holds no examples.")
    dtype = np.float32 if task.is_regression else np.int32
    return GlueSplit(task, split, texts, np.asarray(labels, dtype), path)


def _column_indices(task, path, reader):
    """The indices of the text column(s) and then the label column; reads
    the header row of a task that has one."""
    if not task.has_header:
        return list(task.tsv_columns) + [task.tsv_label]
    try:
        header = next(reader)
    except StopIteration:
        raise UserError(f"{path} is empty.") from None
    header = [h.strip().lstrip("\ufeff") for h in header]
    indices = []
    for column in tuple(task.tsv_columns) + (task.tsv_label,):
        if column not in header:
            raise UserError(
                f"{path}: no column {column!r} in the header {header}."
            )
        indices.append(header.index(column))
    return indices


def _read_rows(task, path, f, max_examples):
    """`(texts, labels)` of an open TSV file: one list per text column."""
    reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
    indices = _column_indices(task, path, reader)
    needed = max(indices) + 1
    texts = [[] for _ in task.tsv_columns]
    labels = []
    first_line = 2 if task.has_header else 1
    for line_number, row in enumerate(reader, start=first_line):
        if not row or (len(row) == 1 and not row[0].strip()):
            continue
        if len(row) < needed:
            raise UserError(
                f"{path}:{line_number}: {len(row)} tab-separated columns, "
                f"expected at least {needed} (text column(s) "
                f"{list(task.tsv_columns)}, label column {task.tsv_label!r})."
            )
        for text_list, index in zip(texts, indices[:-1]):
            text_list.append(row[index])
        labels.append(_parse_label(task, row[indices[-1]], path, line_number))
        if max_examples is not None and len(labels) >= max_examples:
            break
    return texts, labels


def _check_split(task, split):
    if split == "validation" and task.name == "mnli":
        split = "validation_matched"
    allowed = ("train",) + task.eval_splits
    if split not in allowed:
        raise UserError(
            f"GLUE {task.name} has no split {split!r}; use one of {allowed}."
        )
    return split


def load_glue_tfds(task, split, data_dir=None, max_examples=None):
    """Reads a split of TFDS `glue/<task>` (downloads unless already prepared).

    Args:
        task: a `GlueTask` or its name.
        split: TFDS split name.
        data_dir: TFDS data directory.
        max_examples: keep only the first this many examples.

    Returns:
        A `GlueSplit`.
    """
    tfds = extras.import_extra(
        "tensorflow_datasets",
        "tfds",
        "Loading GLUE from TFDS (without --glue_dir)",
    )
    task = get_task(task) if isinstance(task, str) else task
    split = _check_split(task, split)
    try:
        dataset = tfds.load(f"glue/{task.name}", split=split, data_dir=data_dir)
    except (OSError, tfds.download.DownloadError) as error:
        # No network and nothing prepared under --tfds_data_dir.
        raise UserError(
            f"GLUE {task.name} from TFDS (--tfds_data_dir={data_dir!r}) "
            f"cannot be loaded: {error}. Prepare it there, or pass the "
            "official TSV files with --glue_dir."
        ) from error
    if max_examples is not None:
        dataset = dataset.take(int(max_examples))
    texts = [[] for _ in task.tfds_features]
    labels = []
    for example in tfds.as_numpy(dataset):
        for text_list, feature in zip(texts, task.tfds_features):
            text_list.append(example[feature].decode("utf-8"))
        labels.append(example["label"])
    dtype = np.float32 if task.is_regression else np.int32
    return GlueSplit(
        task, split, texts, np.asarray(labels, dtype), f"tfds:glue/{task.name}"
    )


def load_glue(
    task, split, glue_dir=None, tfds_data_dir=None, max_examples=None
):
    """A GLUE split from `glue_dir` (official TSV layout) or else from TFDS.

    Args:
        task: task name (`cola`, `sst2`, `mrpc`, `stsb`, `qqp`, `mnli`,
            `qnli`, `rte`, `wnli`).
        split: `train`, `validation`, `validation_matched`,
            `validation_mismatched`.
        glue_dir: local GLUE directory; TFDS is used when `None`.
        tfds_data_dir: TFDS data directory.
        max_examples: keep only the first this many examples.

    Returns:
        A `GlueSplit`.

    Example:

    >>> train = load_glue("cola", "train", glue_dir="../shared/data/glue")
    >>> len(train.sentences), train.task.num_classes
    (1, 2)
    """
    if glue_dir:
        return read_glue_tsv(task, split, glue_dir, max_examples)
    return load_glue_tfds(task, split, tfds_data_dir, max_examples)


def describe_split(split, max_examples=None):
    """What an evaluation `GlueSplit` is, by its source and, for a file of
    known size (`KNOWN_EVAL_FILES`), its real name.

    Example:

    >>> print(describe_split(load_glue("sst2", "validation", "glue")))
    glue/SST-2/dev.tsv: SST's test split, not GLUE's 872-sentence SST-2 dev
    """
    if max_examples is not None and len(split) >= max_examples:
        return f"{split.source}, its first {len(split)} rows"
    if split.source.startswith("tfds:"):
        return f"{split.source} {split.split} (GLUE's dev split)"
    known = KNOWN_EVAL_FILES.get((split.task.name, len(split)))
    return f"{split.source}: {known}" if known else split.source


def selection_strata(task, labels):
    """The stratum of each label: the class, or for regression the
    quantile bin (of `SELECTION_REGRESSION_BINS`) of the score."""
    labels = np.asarray(labels)
    if not task.is_regression:
        return labels.astype(np.int64)
    inner = np.linspace(0, 1, SELECTION_REGRESSION_BINS + 1)[1:-1]
    edges = np.unique(np.quantile(labels, inner))
    return np.searchsorted(edges, labels, side="right")


def selection_indices(task, labels, fraction, seed=SELECTION_SEED):
    """`(fit, selection)`: sorted row indices of a training file, split
    disjointly, the selection part stratified (`selection_strata`).

    Each stratum of `n >= 2` rows gives `round(fraction * n)` rows, at least
    1 and at most `n - 1`, to the selection part; a single-row stratum
    stays in the fit part. Deterministic in `(labels, fraction, seed)`.

    Raises:
        UserError: no row for either part (naming `--selection_fraction`).

    Example:

    >>> fit, selection = selection_indices(get_task("sst2"), [0, 1] * 10, 0.1)
    >>> len(fit), len(selection)
    (18, 2)
    """
    strata = selection_strata(task, labels)
    rng = np.random.default_rng(seed)
    chosen = []
    for stratum in np.unique(strata):
        members = np.flatnonzero(strata == stratum)
        if len(members) < 2:
            continue
        count = int(np.floor(fraction * len(members) + 0.5))
        count = min(max(count, 1), len(members) - 1)
        chosen.append(rng.permutation(members)[:count])
    selection = np.sort(np.concatenate(chosen)) if chosen else np.zeros(0, int)
    fit = np.setdiff1d(np.arange(len(strata)), selection)
    if not len(selection) or not len(fit):
        raise UserError(
            f"--selection_fraction={fraction}: the {len(strata)} training "
            f"rows of GLUE {task.name} leave no selection split to choose "
            "the learning rate on (each class needs 2 rows)."
        )
    return fit, selection


def subset(split, indices, name):
    """The rows `indices` of `split`, as a `GlueSplit` called `name`."""
    return GlueSplit(
        split.task,
        name,
        [[column[i] for i in indices] for column in split.sentences],
        split.labels[indices],
        split.source,
    )


def carve_selection_split(train, fraction, seed=SELECTION_SEED):
    """`(fit, selection)` `GlueSplit`s of a training split: rates (and any
    epoch choice) are chosen on `selection`, never on an evaluation file.

    Example:

    >>> train = load_glue("cola", "train", glue_dir="../shared/data/glue")
    >>> fit, selection = carve_selection_split(train, 0.1)
    >>> len(fit) + len(selection) == len(train)
    True
    """
    fit, selection = selection_indices(train.task, train.labels, fraction, seed)
    return subset(train, fit, "train"), subset(train, selection, "selection")
