"""A checkpoint of the TUPE authors' fairseq 0.8 BERT, read without fairseq.

Their `Trainer.save_checkpoint` (guolinke/TUPE, `fairseq/trainer.py` and
`checkpoint_utils.save_state`) writes one `torch.save` dict: `args` (the
`argparse.Namespace` of the training command), `model` (the state dict,
float16 after `--fp16` training, on the GPU it trained on),
`optimizer_history`, `extra_state` (with their meter objects) and
`last_optimizer_state`. Only `args` and `model` are used.
"""

import dataclasses
import os

from tupe_tf.convert import torch_pickle
from tupe_tf.utils.errors import UserError

# Their BERT architectures (`fairseq/models/bert/model.py`): one model,
# `bert`, whose sizes the other names only default.
ARCHITECTURES = ("bert", "bert_base", "bert_large")
# The settings of their encoder that tupe-tf computes only one way: arg ->
# (the value it must have, their default where args lack it, why). The rest
# of their model is fixed by the code, not by args (docs/spec.md, "The
# authors' whole model").
FIXED_ARGS = {
    "embedding_normalize": (
        True,
        False,
        "tupe-tf's encoder always normalizes the token embedding",
    ),
    "encoder_normalize_before": (
        False,
        False,
        "tupe-tf's layers normalize after the residual sum (post-LN)",
    ),
    "activation_fn": (
        "gelu",
        "gelu",
        "tupe-tf's masked-LM head uses the exact GELU",
    ),
}
# Their encoder's settings that args do not set.
AUTHORS_BACKBONE = dict(
    segment_encoding="none",
    layer_norm_epsilon=1e-5,
    intermediate_activation="gelu",
    relative_buckets=32,
    relative_max_distance=128,
)
EMBEDDING = "decoder.sentence_encoder.embed_tokens.weight"
_TRAINER_KEYS = ("args", "model")
_MAX_ERROR_CHARS = 200


@dataclasses.dataclass
class FairseqCheckpoint:
    """What the converter uses of a fairseq checkpoint.

    Attributes:
        path: the file.
        args: the training command's arguments (`vars(args)`).
        weights: parameter name -> float32 NumPy array.
        stored_dtypes: the dtypes the parameters were stored in.
        stubbed: names of the pickled classes replaced by inert stand-ins
            (their meters, ...).
    """

    path: str
    args: dict
    weights: dict
    stored_dtypes: list
    stubbed: list

    def arg(self, name):
        """`args.<name>`; a `UserError` naming it when it is absent."""
        if name not in self.args:
            raise UserError(
                f"--checkpoint={self.path}: its args have no "
                f"--{name.replace('_', '-')}: it is not a checkpoint of the "
                "TUPE authors' BERT."
            )
        return self.args[name]


def _short(error):
    """The first sentence of a library's error message."""
    text = " ".join(str(error).split()) or type(error).__name__
    text = text.split(". ")[0]
    if len(text) > _MAX_ERROR_CHARS:
        text = text[:_MAX_ERROR_CHARS] + " ..."
    return text


def _load(path):
    if not os.path.isfile(path):
        raise UserError(f"--checkpoint={path} is not a file.")
    try:
        return torch_pickle.load_torch_file(path)
    except UserError:
        raise
    except MemoryError:
        raise
    except Exception as error:  # pylint: disable=broad-except
        # Whatever torch or pickle raise for a damaged file.
        raise UserError(
            f"--checkpoint={path} cannot be read as a PyTorch checkpoint "
            f"({_short(error)}): it is truncated, damaged or not a file "
            "that torch.save wrote. Pass the .pt file of their train.py "
            "(e.g. checkpoint_best.pt), downloaded again if need be."
        ) from error


def _trainer_state(path, state):
    """Refuses what is not a dict with `args` and `model`."""
    keys = sorted(map(str, state)) if isinstance(state, dict) else None
    if keys is not None and "cfg" in state and "args" not in state:
        raise UserError(
            f"--checkpoint={path} was written by fairseq 0.10 or later "
            "('cfg' instead of 'args'); the TUPE authors' code is fairseq "
            "0.8 (guolinke/TUPE)."
        )
    if keys is None or any(key not in state for key in _TRAINER_KEYS):
        held = f"keys {keys[:8]}" if keys is not None else type(state).__name__
        raise UserError(
            f"--checkpoint={path} is a PyTorch file but not a fairseq "
            f"training checkpoint: it holds {held}, not 'args' and 'model'. "
            "Pass the .pt file of their train.py (e.g. checkpoint_best.pt)."
        )
    if not hasattr(state["args"], "__dict__") or isinstance(
        state["args"], torch_pickle.Stub
    ):
        raise UserError(
            f"--checkpoint={path}: its 'args' is a "
            f"{type(state['args']).__name__}, not the argparse.Namespace "
            "fairseq 0.8 saves."
        )


def _float32_weights(path, model, torch):
    weights, dtypes = {}, set()
    for name, value in model.items():
        if not isinstance(value, torch.Tensor) or not value.is_floating_point():
            raise UserError(
                f"--checkpoint={path}: its model entry {name!r} is a "
                f"{type(value).__name__}, not a floating-point tensor."
            )
        dtypes.add(str(value.dtype).replace("torch.", ""))
        # float16 (their --fp16) and bfloat16 upcast exactly.
        weights[name] = value.float().numpy()
    return weights, sorted(dtypes)


def read_fairseq_checkpoint(path):
    """Reads a checkpoint of the TUPE authors' fairseq 0.8 `Trainer`.

    The file is read with `tupe_tf.convert.torch_pickle` (no fairseq, no
    pickled code run), in either torch serialization; every tensor comes to
    the CPU (a GPU run's checkpoint included) and to float32.

    Args:
        path: the `.pt` file.

    Returns:
        `FairseqCheckpoint`.

    Raises:
        UserError: torch is not installed; the file is missing, truncated,
            not a `torch.save` file, or not a fairseq 0.8 training
            checkpoint (no `args` Namespace and `model` state dict).

    Example:
    ```python
    checkpoint = read_fairseq_checkpoint("checkpoint_best.pt")
    checkpoint.args["rel_pos"], checkpoint.stored_dtypes  # True ['float16']
    ```
    """
    state, stubbed = _load(path)
    _trainer_state(path, state)
    torch = torch_pickle.import_torch()
    weights, dtypes = _float32_weights(path, state["model"], torch)
    return FairseqCheckpoint(
        path=path,
        args=dict(vars(state["args"])),
        weights=weights,
        stored_dtypes=dtypes,
        stubbed=stubbed,
    )


def _refuse_unrepresentable(checkpoint):
    architecture = checkpoint.arg("arch")
    if architecture not in ARCHITECTURES:
        raise UserError(
            f"--checkpoint={checkpoint.path} is a model of --arch="
            f"{architecture}; this converter reads the TUPE authors' BERT "
            f"(--arch={', '.join(ARCHITECTURES)}) only."
        )
    for name, (value, default, reason) in FIXED_ARGS.items():
        given = checkpoint.args.get(name, default)
        if given != value:
            raise UserError(
                f"--checkpoint={checkpoint.path} was trained with "
                f"--{name.replace('_', '-')}={given!r}, which tupe-tf "
                f"cannot compute: {reason} ({value!r} only)."
            )


def backbone_arguments(checkpoint):
    """The `TupeBackbone` arguments of the checkpoint's model.

    From args: the sizes, `--rel-pos` (`tupe-r` with the authors' `[CLS]`
    buckets, else `tupe-a`), the longest sequence (`--max-positions`, which
    their model takes from `--tokens-per-sample` when not given) and the
    dropout; the vocabulary size from the token embedding.

    Args:
        checkpoint: a `FairseqCheckpoint`.

    Returns:
        dict of keyword arguments.

    Raises:
        UserError: naming the arg of a model tupe-tf cannot compute
            (another `--arch`, no `--embedding-normalize`, pre-LN, another
            activation), or an arg or the embedding that is missing.

    Example:
    ```python
    backbone = tupe_tf.TupeBackbone(**backbone_arguments(checkpoint))
    ```
    """
    _refuse_unrepresentable(checkpoint)
    if EMBEDDING not in checkpoint.weights:
        raise UserError(
            f"--checkpoint={checkpoint.path}: its model has no {EMBEDDING}: "
            "it is not a checkpoint of the TUPE authors' BERT."
        )
    max_positions = checkpoint.args.get("max_positions")
    if max_positions is None:
        max_positions = checkpoint.arg("tokens_per_sample")
    encoding = (
        dict(position_encoding="tupe-r", cls_relative="reference")
        if checkpoint.args.get("rel_pos", False)
        else dict(position_encoding="tupe-a")
    )
    return dict(
        vocabulary_size=checkpoint.weights[EMBEDDING].shape[0],
        num_layers=checkpoint.arg("encoder_layers"),
        num_heads=checkpoint.arg("encoder_attention_heads"),
        hidden_dim=checkpoint.arg("encoder_embed_dim"),
        intermediate_dim=checkpoint.arg("encoder_ffn_embed_dim"),
        max_sequence_length=max_positions,
        dropout=checkpoint.args.get("dropout", 0.1),
        **encoding,
        **AUTHORS_BACKBONE,
    )


def classification_heads(checkpoint):
    """Names of the fine-tuning heads in the checkpoint (none after
    pre-training), which the masked-LM preset leaves out."""
    prefix = "classification_heads."
    return sorted(
        {
            name[len(prefix) :].split(".")[0]
            for name in checkpoint.weights
            if name.startswith(prefix)
        }
    )
