"""Preset loading and atomic SavedModel writing shared by all export formats."""

import contextlib
import json
import os

import keras
import keras_hub

from tupe_tf.models.preset_check import check_preset
from tupe_tf.models.preset_check import refuse_missing_files
from tupe_tf.models.tupe_backbone import TupeBackbone
from tupe_tf.models.tupe_tokenizer import TupeTokenizer
from tupe_tf.utils import fileio
from tupe_tf.utils.errors import UserError
from tupe_tf.version import __version__

# Written next to the SavedModel (TF's `assets.extra/` is for such files):
# what was exported, so `tupe_tf.hub.load` picks the right endpoints.
EXPORT_METADATA_FILE = os.path.join("assets.extra", "tupe_tf_export.json")
_TOKENIZER_FILES = (
    "tokenizer.json",
    os.path.join("assets", "tokenizer", "vocabulary.txt"),
)


class LoadedPreset:
    """What a preset directory holds, loaded for export.

    Attributes:
        preset_dir: str. The directory.
        metadata: dict. Its `metadata.json`.
        tokenizer: a `tupe_tf.TupeTokenizer`, or `None` (not loaded).
        backbone: a `tupe_tf.TupeBackbone` (the classifier's, for a
            classifier preset).
        classifier: a `keras_hub.models.TextClassifier` or `None` (backbone
            and masked-LM presets).
    """

    def __init__(self, preset_dir, metadata, tokenizer, backbone, classifier):
        self.preset_dir = preset_dir
        self.metadata = metadata
        self.tokenizer = tokenizer
        self.backbone = backbone
        self.classifier = classifier

    @property
    def kind(self):
        return "classifier" if self.classifier is not None else "backbone"


def _task_class(preset_dir):
    """The class named by `task.json`, or `None` for a backbone preset."""
    task_path = os.path.join(preset_dir, "task.json")
    if not os.path.exists(task_path):
        return None
    with open(task_path) as task_file:
        config = json.load(task_file)
    # keras-hub resolves the task class from `registered_name` the same way.
    registered = config.get("registered_name") or config.get("class_name")
    task_cls = keras.saving.get_registered_object(registered)
    if task_cls is None:
        raise UserError(
            f"Preset {preset_dir!r}: `task.json` names {registered!r}, which "
            "is not a registered Keras class. Import the package that "
            "defines it, or export the backbone alone from a preset without "
            "`task.json`."
        )
    return task_cls


def _graph_tokenizer(preset_dir):
    """The preset's `TupeTokenizer`, whose steps are TensorFlow ops.

    Raises:
        UserError: no tokenizer, or one whose steps run in Python (the
            TUPE authors' pipeline, in a converted checkpoint's preset).
    """
    config_path = os.path.join(preset_dir, _TOKENIZER_FILES[0])
    if os.path.exists(config_path):
        with open(config_path) as config_file:
            registered = json.load(config_file).get("registered_name")
        tokenizer_cls = keras.saving.get_registered_object(registered)
        if tokenizer_cls is not None and not issubclass(
            tokenizer_cls, TupeTokenizer
        ):
            raise UserError(
                f"Preset {preset_dir!r} has a {tokenizer_cls.__name__}, "
                "whose steps run in Python (Moses, fastBPE), not as graph "
                "ops, so it cannot go into a SavedModel. Export "
                "--format=hub_encoder and feed it the token ids of the "
                "tokenizer, in Python."
            )
    refuse_missing_files(
        preset_dir,
        _TOKENIZER_FILES,
        "has no tokenizer",
        "Export needs the vocabulary; save the preset from a task with a "
        "preprocessor, or save the tokenizer with `save_to_preset`.",
    )
    return keras_hub.tokenizers.Tokenizer.from_preset(preset_dir)


def load_preset(preset_dir, with_tokenizer=True):
    """Checks and loads a preset for export.

    A preset whose `task.json` names a `keras_hub.models.TextClassifier`
    exports as a classifier; any other preset (backbone, masked LM) exports
    its backbone.

    Args:
        preset_dir: str. A directory written by `save_to_preset`.
        with_tokenizer: bool. Load the tokenizer (the text formats need
            it; the encoder on token ids does not).

    Returns:
        A `LoadedPreset` (its `tokenizer` None without `with_tokenizer`).

    Raises:
        UserError: (a `ValueError`) naming the directory and the problem
            (missing directory or file, other tupe-tf version, not a
            `TupeBackbone`, a tokenizer that is not graph ops).

    Example:
    ```python
    preset = tupe_tf.export.load_preset("runs/sst2/preset")
    preset.kind  # "classifier"
    ```
    """
    metadata = check_preset(preset_dir)
    tokenizer = _graph_tokenizer(preset_dir) if with_tokenizer else None
    task_cls = _task_class(preset_dir)
    classifier = None
    if task_cls is not None and issubclass(
        task_cls, keras_hub.models.TextClassifier
    ):
        classifier = keras_hub.models.TextClassifier.from_preset(
            preset_dir, preprocessor=None
        )
        backbone = classifier.backbone
    else:
        backbone = keras_hub.models.Backbone.from_preset(preset_dir)
    if not isinstance(backbone, TupeBackbone):
        raise UserError(
            f"Preset {preset_dir!r} holds a {type(backbone).__name__}, not a "
            "`tupe_tf.TupeBackbone`."
        )
    return LoadedPreset(preset_dir, metadata, tokenizer, backbone, classifier)


def atomic_export_dir(export_dir, overwrite=False):
    """Yields a temporary directory that becomes `export_dir` on success.

    The temporary directory is a sibling of `export_dir` (same filesystem,
    so the final `os.rename` is atomic). On any error it is removed and
    `export_dir` is left as it was. An existing `export_dir` is replaced
    only with `overwrite=True`, and only after the new export is complete.

    Args:
        export_dir: str. The final directory.
        overwrite: bool. Replace an existing `export_dir`.

    Raises:
        fileio.OutputExistsError (a `UserError` and `FileExistsError`):
            `export_dir` exists and `overwrite` is False.

    Example:
    ```python
    with atomic_export_dir("out/model") as tmp_dir:
        tf.saved_model.save(module, tmp_dir)
    ```
    """
    return fileio.atomic_directory(
        export_dir, overwrite, what="Export directory"
    )


@contextlib.contextmanager
def folded_positional_bias(backbone, sequence_lengths):
    """Folds the backbone's position bias for tracing *and* saving.

    `tf.saved_model.save` retraces functions that have an input signature,
    so the fold must hold until the save is done. On exit the backbone
    computes the bias from its weights again.

    Args:
        backbone: a `tupe_tf.TupeBackbone`.
        sequence_lengths: iterable of int (empty folds nothing).

    Example:
    ```python
    with folded_positional_bias(backbone, [128]):
        tf.saved_model.save(module, export_dir)
    ```
    """
    sequence_lengths = list(sequence_lengths)
    try:
        if sequence_lengths:
            backbone.fold_positional_bias(sequence_lengths)
        yield backbone
    finally:
        backbone.unfold_positional_bias()


def write_export_metadata(saved_model_dir, **fields):
    """Records what was exported in `assets.extra/tupe_tf_export.json`."""
    path = os.path.join(saved_model_dir, EXPORT_METADATA_FILE)
    fileio.write_json_atomically(
        path, {"tupe_tf_version": __version__, **fields}
    )


def read_export_metadata(saved_model_dir):
    """The export metadata, or `None` for a SavedModel not made here."""
    path = os.path.join(saved_model_dir, EXPORT_METADATA_FILE)
    if not os.path.exists(path):
        return None
    with open(path) as metadata_file:
        return json.load(metadata_file)
