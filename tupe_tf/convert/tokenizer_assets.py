"""The tokenizer a converted preset gets from `--bpe_codes` and `--dict`.

`fairseq_preprocessor` is the one place where the converter hands the
authors' BPE codes and dictionary to the package's tokenizer of their
pipeline (`tupe_tf.TupeFairseqTokenizer`), after checking that the codes
belong to the dictionary.
"""

import tupe_tf
from tupe_tf.utils.errors import UserError

# A dictionary holds the merged symbols its corpus kept after BPE (one that
# later merges always absorbed, or that fell below the dictionary's size
# or count threshold, is missing); codes of another BPE run share few.
MIN_MERGES_IN_DICTIONARY = 0.5


def _merged_tokens(codes):
    """The token each merge makes, as a fairseq dictionary spells it: a
    word's last symbol (`...</w>`) bare, any other with `@@`."""
    # tupe_tf.models loads Keras: the converter refuses a bad checkpoint
    # before (convert_checkpoint imports this module at its top).
    from tupe_tf.models.fairseq import fastbpe_codes

    end = fastbpe_codes.END_OF_WORD
    tokens = []
    for left, right in codes.ranks:
        merged = left + right
        if merged.endswith(end):
            tokens.append(merged[: -len(end)])
        else:
            tokens.append(merged + fastbpe_codes.CONTINUATION)
    return tokens


def check_codes_match_dictionary(codes, symbols, codes_path, dictionary_path):
    """Refuses BPE codes whose merged tokens the dictionary mostly lacks.

    Args:
        codes: `tupe_tf.models.fairseq.fastbpe_codes.FastBpeCodes`.
        symbols: the dictionary's symbols (`read_fairseq_dictionary`).
        codes_path, dictionary_path: the files, for the message.

    Returns:
        `(found, merges)`: how many merged tokens the dictionary holds, of
        how many merges.

    Raises:
        UserError: naming `--bpe_codes` and `--dict`: no merge, or fewer
            than half the merged tokens in the dictionary.
    """
    tokens = _merged_tokens(codes)
    vocabulary = set(symbols)
    found = sum(token in vocabulary for token in tokens)
    if not tokens or found < MIN_MERGES_IN_DICTIONARY * len(tokens):
        raise UserError(
            f"--bpe_codes={codes_path} does not belong to --dict="
            f"{dictionary_path}: {found} of its {len(tokens)} merged tokens "
            "are in the dictionary. Pass the bpe-code and dict.txt of the "
            "same pre-training data."
        )
    return found, len(tokens)


def fairseq_preprocessor(dictionary_path, codes_path, sequence_length):
    """The preprocessor of the authors' pipeline for a converted preset.

    Its tokenizer holds `dict.txt` and `bpe-code` as preset assets; the
    preprocessor packs sentences as their fine-tuning does, so
    `tupe_tf.TupeTextClassifier.from_preset(preset, num_classes=...)` gets
    it without arguments.

    Args:
        dictionary_path: their `dict.txt`.
        codes_path: their fastBPE `bpe-code`.
        sequence_length: the packed length (their longest sequence).

    Returns:
        `(preprocessor, (found, merges))`: a
        `tupe_tf.TupeFairseqTextClassifierPreprocessor`, and the count of
        `check_codes_match_dictionary`.

    Raises:
        UserError: the codes cannot be read or do not belong to the
            dictionary.
    """
    tokenizer = tupe_tf.TupeFairseqTokenizer(
        dictionary=dictionary_path, bpe_codes=codes_path
    )
    matched = check_codes_match_dictionary(
        tokenizer.codes,
        tokenizer.get_vocabulary(),
        codes_path,
        dictionary_path,
    )
    preprocessor = tupe_tf.TupeFairseqTextClassifierPreprocessor(
        tokenizer, sequence_length=sequence_length
    )
    return preprocessor, matched
