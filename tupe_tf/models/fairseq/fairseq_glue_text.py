"""The TUPE authors' GLUE text pipeline up to BPE, in Python.

guolinke/TUPE's `preprocess/glue/process.sh` pipes each GLUE column through
their `remove_non_utf8_chars.py`, `precleanup_english.py`, Moses'
`normalize-punctuation.perl en` and `remove-non-printing-char.perl`, their
`cleanup.py` and `replace_patterns.py` (and `align_text.py`, which changes
nothing), `sed 's/\\/ /g'`, Moses' `tokenizer.perl -no-escape -l en` and
`gawk tolower`, then fastBPE. `glue_words` gives the words that reach
fastBPE. The steps of their scripts are reimplemented here; the Moses ones
live in `moses_text`. The sed and gawk steps change nothing by then:
`cleanup.py` already removed every backslash and lowercased with Python's
`str.lower`, after which glibc's `tolower` changes no character.

Their pipeline reads one example per line: a line break inside a text
would make two examples there, so here it reads as a space.

Example:
>>> glue_words("Visit https://x.org -- it's GREAT!!")  # doctest: +SKIP
['visit', '<', 'url', '>', '-', '-', 'it', "'s", 'great', '!', '!']
"""

import re
import string

from tupe_tf.models.fairseq import moses_text

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_DOT_RUN = re.compile(r"\.{4,}")
_ASTERISK = re.compile(r" \*(\S)")
_PUNCTUATION = re.escape(string.punctuation)
_WORD_EDGES = re.compile(rf"([{_PUNCTUATION}]*)(.*?)([{_PUNCTUATION}]*)", re.S)
# replace_patterns.py's word patterns, tried in this order on each word.
_PATTERNS = (
    (
        re.compile(
            r"^(?:(?:https?|ftp)://|www\.)[-a-z0-9+&@#/%?=~_|!:,.;]*"
            r"[-a-z0-9+&@#/%=~_|]$"
        ),
        "<url>",
    ),
    # As theirs: [^$s] excludes "$" and "s" (they meant whitespace).
    (re.compile(r"^[^$s]{3}[^$s]*\.(?:com|net|org|edu|gov)$"), "<url>"),
    (
        re.compile(
            r"^([a-z0-9_\-.]+)@((\[[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}\.)|"
            r"(([a-z0-9\-]+\.)+))([a-z]{2,4}|[0-9]{1,3})(\]?)$"
        ),
        "<email>",
    ),
    (
        re.compile(
            r"^[a-z_-][a-z0-9_-]{4}[a-z0-9_-]*\.(?:pdf|mp4|mp3|doc|xls|docx|"
            r"ppt|pptx|wav|wma|csv|tsv|cpp|py|bat|reg|png|jpg|mov|avi|gif|"
            r"rtf|txt|bmp|mid)$"
        ),
        "<file>",
    ),
)


def as_line(text):
    """The text as one line of their first script's output.

    Args:
        text: str, or bytes (UTF-8; invalid bytes are dropped, as their
            `remove_non_utf8_chars.py` drops them).

    Returns:
        str without line breaks or surrogate code points.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="ignore")
    return _LINE_BREAK.sub(" ", _SURROGATE.sub("", text))


def pre_cleanup(line):
    """What their `precleanup_english.py` does to one line."""
    line = " ".join(line.replace("\t", " ").split())
    line = _DOT_RUN.sub("...", line)
    line = line.replace("<<", "\u00ab").replace(">>", "\u00bb")
    # Their two "space around brackets" rules match these literal strings.
    line = line.replace(" ,:.)]\u00bb", ",:.)]\u00bb")
    line = line.replace("[(\u00ab ", "[(\u00ab")
    line = line.replace(",,", ",").replace(",.", ".")
    line = _ASTERISK.sub(r" \1", line)
    return " ".join(line.split())


def _split_edge_punctuation(word):
    """The ASCII punctuation at the word's ends, one token per character."""
    lead, core, trail = _WORD_EDGES.fullmatch(word).groups()
    return [*lead, *([core] if core else []), *trail]


def post_cleanup(line):
    """What their GLUE `cleanup.py` does to one line."""
    line = line.strip().lower().replace("\\", " ")
    line = line.replace("...", " ... ").replace("..", " .. ")
    return " ".join(
        token
        for word in line.split()
        for token in _split_edge_punctuation(word)
    )


def _replace_word(word):
    for pattern, replacement in _PATTERNS:
        word = pattern.sub(replacement, word)
    return " - ".join(word.split("-"))


def replace_patterns(line):
    """What their `replace_patterns.py` does: URLs, e-mail addresses and
    file names become `<url>`, `<email>`, `<file>`; hyphens are spaced."""
    return " ".join(_replace_word(word) for word in line.split())


def glue_words(text):
    """The words of `text` that their pipeline hands to fastBPE.

    Args:
        text: str or UTF-8 bytes (see `as_line`).

    Returns:
        list of str.
    """
    line = pre_cleanup(as_line(text))
    line = moses_text.normalize_punctuation(line)
    line = post_cleanup(moses_text.remove_non_printing(line))
    return moses_text.tokenize_english(replace_patterns(line)).split()
