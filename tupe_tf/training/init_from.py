"""`--init_from`: a new pre-training run that starts from a preset's weights.

Unlike a resume (the same `--model_dir` again), a run with `--init_from=DIR`
is a new run: its optimizer, step counter, schedule and data stream start
afresh, and only the weights come from `DIR`, one of

- a tupe-tf preset (`<model_dir>/preset` of an earlier run): the masked LM
  (backbone and head) is copied, every flag of the model as in the preset
  but the ones of `FREE_OPTIONS`; a longer `--max_sequence_length` grows
  the position tables (`tupe_tf.models.context_extension`, the rule in
  docs/spec.md) and `--rope_max_wavelength` may change;
- a keras-hub `BertBackbone` preset (e.g. `bert_base_en_uncased` saved
  locally): `load_bert_weights` copies it into the run's backbone, whatever
  its `--position_encoding`; the new positional parameters and the masked-LM
  head start as a fresh model's (BERT's position table grows too).

What does not fit (the BERT dims, the vocabulary, another option of a
tupe-tf preset, a table that would shrink) is refused naming the preset's
value and the flag, before anything is built. A run that resumes from its
own checkpoints does not read `DIR` again; where it started is kept in
`run.json` and `results.json`.

Example:

>>> source = read_source("runs/phase1/model/preset")  # doctest: +SKIP
>>> check_fit(source, config.model)  # doctest: +SKIP
>>> vocabulary = vocab.load_vocabulary(config.vocab_file)  # doctest: +SKIP
>>> check_vocabulary(source, vocabulary)  # doctest: +SKIP
>>> record = initialize(model, source)  # doctest: +SKIP
"""

import dataclasses
import os
from typing import Optional

import keras_hub

from data_pipeline import vocab
from tupe_tf.models.bert_weights import load_bert_weights
from tupe_tf.models.context_extension import copy_weights
from tupe_tf.models.position_encodings import POSITION_ENCODING_TABLE
from tupe_tf.models.preset_check import check_preset
from tupe_tf.models.preset_check import read_preset_json
from tupe_tf.models.tupe_backbone import TupeBackbone
from tupe_tf.models.tupe_masked_lm import TupeMaskedLM
from tupe_tf.utils.errors import UserError

TUPE_TF = "tupe-tf"
BERT = "keras-hub BertBackbone"

DIMS = ("num_layers", "num_heads", "hidden_dim", "intermediate_dim")
# The backbone options a run may set apart from its tupe-tf preset's: none
# shapes a weight but `max_sequence_length`, whose tables grow.
FREE_OPTIONS = (
    "dropout",
    "max_sequence_length",
    "rope_max_wavelength",
    "rope_scaling",
    "rope_scaling_factor",
    "rope_trained_length",
)
VOCABULARY_ASSET = os.path.join("assets", "tokenizer", "vocabulary.txt")


@dataclasses.dataclass(frozen=True)
class InitSource:
    """A checked `--init_from` directory.

    Args:
        path: its absolute path.
        kind: `TUPE_TF` or `BERT`.
        backbone: the preset's backbone config (`config.json`'s `config`).
        has_head: whether it holds a masked-LM head (`task.json`).
        trained_length: the sequence length of its preprocessor (the
            `--seq_length` a tupe-tf preset was trained at), or `None`.
    """

    path: str
    kind: str
    backbone: dict
    has_head: bool
    trained_length: Optional[int] = None

    def flag(self):
        return f"--init_from={self.path!r}"


def read_source(path):
    """The `--init_from` directory as an `InitSource`.

    Raises:
        UserError: it is neither a tupe-tf preset nor a keras-hub
            `BertBackbone` preset, or is damaged.
    """
    flag = f"--init_from={path!r}"
    config_file = os.path.join(path, "config.json")
    weights_file = os.path.join(path, "model.weights.h5")
    config = {}
    if os.path.isfile(config_file):
        try:
            config = read_preset_json(path, "config.json")
        except UserError as error:
            raise UserError(f"{flag}: {error}") from error
    class_name = config.get("class_name") if isinstance(config, dict) else None
    module = str(config.get("module", "")) if class_name else ""
    if class_name == "TupeBackbone":
        kind = TUPE_TF
        try:
            check_preset(path)
        except UserError as error:
            raise UserError(f"{flag}: {error}") from error
    elif (
        class_name == "BertBackbone"
        and module.startswith("keras_hub")
        and os.path.isfile(weights_file)
    ):
        kind = BERT
    else:
        found = f"a {class_name}" if class_name else "no model config.json"
        raise UserError(
            f"{flag} is neither a tupe-tf preset nor a keras-hub BertBackbone "
            f"preset (it holds {found}). Pass the preset of a pre-training "
            "run (<model_dir>/preset) or a directory written by "
            "keras_hub.models.BertBackbone.save_to_preset."
        )
    return InitSource(
        path=os.path.abspath(path),
        kind=kind,
        backbone=config.get("config", {}),
        has_head=kind == TUPE_TF
        and os.path.isfile(os.path.join(path, "task.json")),
        trained_length=_trained_length(path, flag),
    )


def _trained_length(path, flag):
    """The preset preprocessor's `sequence_length`, if it has one."""
    if not os.path.isfile(os.path.join(path, "preprocessor.json")):
        return None
    try:
        config = read_preset_json(path, "preprocessor.json")
    except UserError as error:
        raise UserError(f"{flag}: {error}") from error
    length = config.get("config", {}).get("sequence_length")
    return int(length) if isinstance(length, int) else None


def _refuse(source, what, preset_value, flag, run_value, advice):
    raise UserError(
        f"{source.flag()}: the preset's {what} is {preset_value!r}, "
        f"this run's ({flag}) is {run_value!r}. {advice}"
    )


def check_fit(source, model_config):
    """Refuses a model that `source`'s weights do not fit.

    Args:
        source: an `InitSource`.
        model_config: the run's `ModelConfig`.

    Raises:
        UserError: naming the preset's value and the run's flag.
    """
    run = model_config.backbone_kwargs(vocabulary_size=None)
    preset = source.backbone
    dims_flag = "--model_size, --{name}"
    for name in DIMS:
        if preset.get(name) != run[name]:
            _refuse(
                source,
                name,
                preset.get(name),
                dims_flag.format(name=name),
                run[name],
                f"Pass --{name}={preset.get(name)}: a new run takes the "
                "preset's dims.",
            )
    encoding = POSITION_ENCODING_TABLE[run["position_encoding"]]
    if source.kind == BERT:
        grows = encoding.input_positions and encoding.input_table == "learned"
        options = (
            ("num_segments",) if run["segment_encoding"] == "input" else ()
        )
    else:
        grows = not encoding.length_free
        options = tuple(
            name
            for name in run
            if name not in DIMS + FREE_OPTIONS + ("vocabulary_size",)
        )
    for name in options:
        if name in preset and preset[name] != run[name]:
            _refuse(
                source,
                name,
                preset[name],
                f"--{name}",
                run[name],
                f"Pass --{name}={preset[name]} (only "
                f"{', '.join('--' + o for o in FREE_OPTIONS)} may differ; "
                "to change the position encoding, start from a keras-hub "
                "BertBackbone preset).",
            )
    length = preset.get("max_sequence_length")
    if grows and length is not None and run["max_sequence_length"] < length:
        _refuse(
            source,
            "max_sequence_length",
            length,
            "--max_sequence_length",
            run["max_sequence_length"],
            "Its position tables can grow, not shrink: pass "
            f"--max_sequence_length={length} or more.",
        )


def check_vocabulary(source, vocabulary):
    """Refuses a `--vocab_file` other than the preset's vocabulary: another
    size, or (where the preset holds its tokenizer's vocabulary) other
    tokens.

    Args:
        source: an `InitSource`.
        vocabulary: the run's `data_pipeline.vocab.Vocabulary`.

    Raises:
        UserError: naming both.
    """
    preset_size = source.backbone.get("vocabulary_size")
    vocab_flag = f"--vocab_file={vocabulary.path!r}"
    advice = (
        "Pass the vocabulary the preset was trained with, and shards built "
        "with it."
    )
    if preset_size != vocabulary.size:
        _refuse(
            source,
            "vocabulary_size",
            preset_size,
            vocab_flag,
            vocabulary.size,
            advice,
        )
    asset = os.path.join(source.path, VOCABULARY_ASSET)
    if os.path.isfile(asset) and _tokens(source, asset) != vocabulary.tokens:
        raise UserError(
            f"{source.flag()}: {vocab_flag} holds other tokens than the "
            f"preset's vocabulary ({asset}), though as many. {advice}"
        )


def _tokens(source, asset):
    """The tokens of the preset's vocabulary file `asset`."""
    try:
        return vocab.load_vocabulary(asset).tokens
    except UserError as error:
        raise UserError(f"{source.flag()}: {error}") from error


def initialize(model, source):
    """Copies `source`'s weights into the run's built masked LM.

    Args:
        model: the run's `TupeMaskedLM`, built.
        source: an `InitSource` that `check_fit` and `check_vocabulary`
            accepted.

    Returns:
        The start record for `run.json` and `results.json`: the preset, its
        kind, position encoding and length, the grown tables
        (`{path: [old, new]}`) and the variables that start as a fresh
        model's.
    """
    if source.kind == TUPE_TF:
        grown, new = _from_tupe_tf(model, source)
    else:
        grown, new = _from_bert(model, source)
    return {
        "preset": source.path,
        "kind": source.kind,
        "position_encoding": source.backbone.get("position_encoding", "bert"),
        "max_sequence_length": source.backbone.get("max_sequence_length"),
        "trained_length": source.trained_length,
        "grown_tables": grown,
        "new_variables": new,
    }


def _from_tupe_tf(model, source):
    if source.has_head:
        trained = TupeMaskedLM.from_preset(source.path, preprocessor=None)
    else:
        trained = TupeBackbone.from_preset(source.path)
    return copy_weights(trained, model, source.trained_length)


def _from_bert(model, source):
    bert = keras_hub.models.BertBackbone.from_preset(source.path)
    backbone = model.backbone
    grown = {}
    copies_table = backbone.position_embedding is not None and bool(
        backbone.position_embedding.weights
    )
    length, table = backbone.max_sequence_length, bert.max_sequence_length
    untrained = (source.trained_length or table) < table
    if copies_table and (length != table or untrained):
        # load_bert_weights copies tables of one length: grow BERT's first.
        config = dict(bert.get_config(), max_sequence_length=length)
        grown_bert = keras_hub.models.BertBackbone.from_config(config)
        grown, _ = copy_weights(bert, grown_bert, source.trained_length)
        bert = grown_bert
    new = load_bert_weights(backbone, bert)
    head = [v.path for v in model.weights if v.path.startswith("mlm_head/")]
    return grown, sorted({v.path for v in new} | set(head))
