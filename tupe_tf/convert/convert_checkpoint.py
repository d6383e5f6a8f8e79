"""Converting a TUPE authors' fairseq checkpoint to a tupe-tf preset."""

import dataclasses
import os

import tupe_tf
from tupe_tf.convert import fairseq_checkpoint
from tupe_tf.convert import tokenizer_assets
from tupe_tf.utils import fileio
from tupe_tf.utils.errors import UserError


@dataclasses.dataclass
class Conversion:
    """What `convert_fairseq_checkpoint` wrote.

    Attributes:
        output: the preset directory.
        backbone: the `TupeBackbone` arguments.
        stored_dtypes: the checkpoint's parameter dtypes (float16: upcast).
        left_out: what of the checkpoint the preset does not hold.
        bpe_merges_in_dictionary: `(found, merges)` with `--bpe_codes`.
    """

    output: str
    backbone: dict
    stored_dtypes: list
    left_out: list
    bpe_merges_in_dictionary: tuple = None


def _check_dictionary(symbols, dictionary_path, checkpoint, backbone):
    rows = backbone["vocabulary_size"]
    if len(symbols) != rows:
        raise UserError(
            f"--dict={dictionary_path} gives {len(symbols)} token ids "
            "(with fairseq's special symbols and <mask>), but the token "
            f"embedding of --checkpoint={checkpoint.path} has {rows} rows. "
            "Pass the dict.txt of the data the checkpoint was trained on."
        )


def build_masked_lm(checkpoint, backbone):
    """Their model as a `TupeMaskedLM` (MLM head tied to the embedding, as
    theirs), weights copied in, no preprocessor."""
    masked_lm = tupe_tf.TupeMaskedLM(
        tupe_tf.TupeBackbone(**backbone), preprocessor=None
    )
    try:
        tupe_tf.load_tupe_reference_weights(masked_lm, checkpoint.weights)
    except ValueError as error:
        raise UserError(
            f"--checkpoint={checkpoint.path}: its weights do not match its "
            f"args: {error}"
        ) from error
    return masked_lm


def _left_out(checkpoint):
    heads = fairseq_checkpoint.classification_heads(checkpoint)
    left_out = ["optimizer state", "training meters"]
    if heads:
        left_out.append(f"classification heads {heads}")
    return left_out


def convert_fairseq_checkpoint(
    checkpoint, dictionary, output, bpe_codes=None, overwrite=False
):
    """Writes the keras-hub preset of a TUPE authors' fairseq checkpoint.

    `tupe_tf.TupeMaskedLM.from_preset(output)` loads it: their encoder and
    their masked-LM head (tied to the token embedding), in the token ids of
    their dictionary (`<s>`=0, `<pad>`=1, `</s>`=2, ..., `<mask>` last).
    Everything is read and checked first; the preset is written through a
    temporary directory, so a refusal or a failure leaves nothing at
    `output`.

    Args:
        checkpoint: their `.pt` file (`Trainer.save_checkpoint`).
        dictionary: their `dict.txt`.
        output: the preset directory to write.
        bpe_codes: their fastBPE `bpe-code`, for the preset's tokenizer
            (optional).
        overwrite: replace an existing `output`.

    Returns:
        `Conversion`.

    Raises:
        UserError: naming the flag (`--checkpoint`, `--dict`,
            `--bpe_codes`, `--output`) of input that cannot be converted.

    Example:
    ```python
    convert_fairseq_checkpoint(
        "tupe/checkpoint_best.pt", "tupe/dict.txt", "presets/tupe_r")
    masked_lm = tupe_tf.TupeMaskedLM.from_preset("presets/tupe_r")
    ```
    """
    if os.path.exists(output) and not overwrite:
        raise UserError(
            f"--output={output} already exists. Pass --overwrite to replace "
            "it (only once the new preset is complete)."
        )
    loaded = fairseq_checkpoint.read_fairseq_checkpoint(checkpoint)
    backbone = fairseq_checkpoint.backbone_arguments(loaded)
    # Keras and TensorFlow load from here on: a bad checkpoint is refused
    # before.
    from tupe_tf.models.fairseq import fairseq_dictionary

    symbols = fairseq_dictionary.read_fairseq_dictionary(dictionary)
    _check_dictionary(symbols, dictionary, loaded, backbone)
    masked_lm = build_masked_lm(loaded, backbone)
    preprocessor, matched = None, None
    if bpe_codes is not None:
        preprocessor, matched = tokenizer_assets.fairseq_preprocessor(
            dictionary, bpe_codes, backbone["max_sequence_length"]
        )
    with fileio.atomic_directory(output, overwrite, what="--output") as tmp:
        masked_lm.save_to_preset(tmp)
        if preprocessor is not None:
            preprocessor.save_to_preset(tmp)
    return Conversion(
        output=output,
        backbone=backbone,
        stored_dtypes=loaded.stored_dtypes,
        left_out=_left_out(loaded),
        bpe_merges_in_dictionary=matched,
    )
