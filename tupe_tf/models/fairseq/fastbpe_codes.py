"""fastBPE's `applybpe`, as the TUPE authors' copy of fastBPE runs it."""

from tupe_tf.utils.errors import UserError

END_OF_WORD = "</w>"
CONTINUATION = "@@"
# Their fastBPE (guolinke/TUPE, fastbpe/) passes these words through whole.
WHOLE_WORDS = frozenset(("<unk>", "<url>", "<file>", "<email>"))


class FastBpeCodes:
    """BPE codes learned by fastBPE (`learnbpe`), applied as `applybpe` does.

    Each word starts as its characters, the last one marked `</w>`; the
    pair of adjacent symbols with the earliest code merges, every
    occurrence left to right, until no pair has a code. A word splits into
    symbols `a@@ b@@ c` (the last one without its `</w>`). PyPI's `fastBPE`
    wraps the upstream C++ without the authors' whole words; subword-nmt
    and Hugging Face `tokenizers` read other file formats and drop or
    replace characters that no code names, which fastBPE keeps.

    Args:
        path: the codes file (`left right count` per line, in merge order).

    Example:
    ```python
    codes = FastBpeCodes("bpe-code")
    codes.split_word("lowest")  # e.g. ['low@@', 'est']
    ```
    """

    def __init__(self, path):
        self.ranks = {}
        try:
            with open(path, encoding="utf-8", newline="\n") as file:
                for number, line in enumerate(file, start=1):
                    fields = [f for f in line.rstrip("\n").split(" ") if f]
                    if len(fields) != 3:
                        raise UserError(
                            f"bpe_codes={path}: line {number} is "
                            f"{line.rstrip()!r}, not 'left right count': "
                            "pass the codes that fastBPE learnbpe wrote."
                        )
                    self.ranks.setdefault(
                        (fields[0], fields[1]), len(self.ranks)
                    )
        except (OSError, UnicodeDecodeError) as error:
            raise UserError(
                f"bpe_codes={path} cannot be read ({error})."
            ) from error
        self._cache = {}

    def _merge(self, symbols):
        while len(symbols) > 1:
            pairs = [
                (self.ranks[pair], i)
                for i, pair in enumerate(zip(symbols, symbols[1:]))
                if pair in self.ranks
            ]
            if not pairs:
                break
            first = symbols[min(pairs)[1]]
            second = symbols[min(pairs)[1] + 1]
            merged, i = [], 0
            while i < len(symbols):
                if (
                    i + 1 < len(symbols)
                    and symbols[i] == first
                    and symbols[i + 1] == second
                ):
                    merged.append(first + second)
                    i += 2
                else:
                    merged.append(symbols[i])
                    i += 1
            symbols = merged
        return symbols

    def split_word(self, word):
        """The BPE symbols of one word (no spaces in it).

        Args:
            word: str.

        Returns:
            list of str.
        """
        if word in WHOLE_WORDS:
            return [word]
        if word not in self._cache:
            symbols = self._merge([*word[:-1], word[-1] + END_OF_WORD])
            self._cache[word] = [s + CONTINUATION for s in symbols[:-1]] + [
                symbols[-1][: -len(END_OF_WORD)]
            ]
        return self._cache[word]
