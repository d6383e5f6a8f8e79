"""The token ids of a fairseq 0.8 dictionary (`dict.txt`), as the TUPE
authors' code (guolinke/TUPE, `fairseq/data/dictionary.py`) assigns them."""

from tupe_tf.utils.errors import UserError

# What their `Dictionary()` holds before it reads `dict.txt`: ids 0..6.
SPECIAL_SYMBOLS = (
    "<s>",
    "<pad>",
    "</s>",
    "<unk>",
    "<file>",
    "<email>",
    "<url>",
)
# Appended by their masked_lm and sentence_prediction tasks (`add_symbol`:
# a new id only when the file does not hold it already).
MASK_SYMBOL = "<mask>"


def _symbol(line, number, path, flag):
    """The symbol of one `<symbol> <count>` line (the symbol may hold
    spaces: their reader splits at the last one)."""
    symbol, space, count = line.rstrip("\r\n").rpartition(" ")
    try:
        int(count)
    except ValueError:
        space = ""
    if not space:
        raise UserError(
            f"{flag}={path}: line {number} is {line.rstrip()!r}, not "
            "'<token> <count>': pass the dict.txt that fairseq's "
            "preprocess.py wrote for this model."
        )
    return symbol


def read_fairseq_dictionary(path, flag="--dict"):
    """The symbols of a fairseq dictionary file, in id order.

    Their ids: `<s>`=0, `<pad>`=1, `</s>`=2, `<unk>`=3, `<file>`=4,
    `<email>`=5, `<url>`=6, then one per line of the file (in file order;
    preprocess.py already padded the file with `madeupwordNNNN` lines), then
    `<mask>` unless the file holds it.

    Args:
        path: the `dict.txt` file.
        flag: how messages name it.

    Returns:
        list of str: the symbol of each id (a symbol listed twice keeps both
        ids; their lookup uses the later one).

    Raises:
        UserError: the file is missing, not UTF-8 or has a line that is not
            `<token> <count>`.

    Example:
    ```python
    symbols = read_fairseq_dictionary("tupe/dict.txt")
    symbols[:3], symbols[-1]  # (['<s>', '<pad>', '</s>'], '<mask>')
    ```
    """
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.readlines()
    except (OSError, UnicodeDecodeError) as error:
        raise UserError(
            f"{flag}={path} cannot be read ({error}): pass the dict.txt of "
            "the checkpoint's data directory."
        ) from error
    symbols = list(SPECIAL_SYMBOLS)
    symbols.extend(
        _symbol(line, number, path, flag)
        for number, line in enumerate(lines, start=1)
    )
    if MASK_SYMBOL not in symbols:
        symbols.append(MASK_SYMBOL)
    return symbols
