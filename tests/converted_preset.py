"""A preset converted from the TUPE authors' fixture checkpoint, with their
tokenizer: the fine-tuning and export tests' converted model.

The checkpoint and `dict.txt` are the converter's fixtures
(`tests/fixtures/fairseq_checkpoint/`, written by their own Trainer); the
BPE codes are made here, merges to words of that dictionary, so that short
English texts tokenize to known ids.
"""

import os

FIXTURES = os.path.join(
    os.path.dirname(__file__), "fixtures", "fairseq_checkpoint"
)
DICTIONARY = os.path.join(FIXTURES, "dict.txt")
OUTPUTS = os.path.join(FIXTURES, "outputs.npz")
# Words of the fixture dictionary (`the` through its `th@@`); `was` first,
# so that its merges rank above those of `as`.
WORDS = "was the of to in is he it on as by at an be".split()
PAD_ID = 1


def bpe_codes():
    """fastBPE codes (`left right count` lines, `</w>` ending a word)
    that merge the letters of `WORDS` left to right."""
    merges = []
    for word in WORDS:
        symbol = word[0]
        for index, letter in enumerate(word[1:], start=2):
            right = letter + ("</w>" if index == len(word) else "")
            if (symbol, right) not in merges:
                merges.append((symbol, right))
            symbol += letter
    return "".join(
        f"{left} {right} {len(merges) - rank}\n"
        for rank, (left, right) in enumerate(merges)
    )


def converted_preset(directory, case="tupe-r_fp32_zip"):
    """Converts the fixture checkpoint `case` with `bpe_codes()` into
    `<directory>/preset`; returns the preset's path."""
    from tupe_tf.convert.convert_checkpoint import convert_fairseq_checkpoint

    codes = os.path.join(directory, "bpe-code")
    with open(codes, "w", encoding="utf-8") as file:
        file.write(bpe_codes())
    preset = os.path.join(directory, "preset")
    convert_fairseq_checkpoint(
        os.path.join(FIXTURES, f"{case}.pt"), DICTIONARY, preset, codes
    )
    return preset
