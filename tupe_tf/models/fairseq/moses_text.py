"""The three Moses scripts of the TUPE authors' GLUE pipeline, for English.

`normalize_punctuation` is `normalize-punctuation.perl en`,
`remove_non_printing` is `remove-non-printing-char.perl` and
`tokenize_english` is `tokenizer.perl -no-escape -l en`, as
guolinke/TUPE's `preprocess/glue/process.sh` runs them. The punctuation
rules and the English non-breaking prefixes come from sacremoses (the
`fairseq-text` extra). sacremoses' tokenizer is not used: its character
tables lack CJK ideographs, Hangul syllables and more, and count Indic
viramas as letters (CJK and Hangul words come apart into characters, Hindi
and Tamil ones stay whole), so it differs from tokenizer.perl on 5 of the
412 texts of tests/fixtures/fairseq_tokenization; it also keeps a line's
final `u.s.` whole, where tokenizer.perl splits every final period.

Unicode properties come from the `regex` module's tables, perl's from its
own (perl 5.36: Unicode 14). They agree on every character assigned in
Unicode 14 but for 44 whose properties later versions changed (e.g. the
combining Latin letters U+0363..U+036F became alphabetic); a character
assigned after the perl's Unicode version is, for that perl, unassigned
and so replaced by `remove-non-printing-char.perl`.

Example:
>>> tokenize_english("mr. smith 's car costs $5,000...")  # doctest: +SKIP
"mr. smith ' s car costs $ 5,000 ..."
"""

import functools
import re

import regex

from tupe_tf.utils import extras

_ALPHA = r"\p{Alphabetic}"
_DIGIT = r"\p{N}"  # perl's IsN: every number, not only decimal digits
# tokenizer.perl's `s/([^\p{IsAlnum}\s\.\'\`\,\-])/ $1 /g` (IsAlnum:
# alphabetic or decimal digit).
_PAD_SPECIAL = regex.compile(r"([^\p{Alphabetic}\p{Nd}\s.'`,\-])")
_COMMA_RULES = (
    (regex.compile(rf"([^{_DIGIT}]),"), r"\1 , "),
    (regex.compile(rf",([^{_DIGIT}])"), r" , \1"),
    (regex.compile(rf"([{_DIGIT}]),$"), r"\1 ,"),
)
_ENGLISH_APOSTROPHE_RULES = (
    (regex.compile(rf"([^{_ALPHA}])'([^{_ALPHA}])"), r"\1 ' \2"),
    (regex.compile(rf"([^{_ALPHA}{_DIGIT}])'([{_ALPHA}])"), r"\1 ' \2"),
    (regex.compile(rf"([{_ALPHA}])'([^{_ALPHA}])"), r"\1 ' \2"),
    (regex.compile(rf"([{_ALPHA}])'([{_ALPHA}])"), r"\1 '\2"),
    (regex.compile(rf"([{_DIGIT}])'(s)"), r"\1 '\2"),
)
_HAS_ALPHA = regex.compile(_ALPHA)
_STARTS_LOWERCASE = regex.compile(r"\p{Lowercase}")
_STARTS_DIGITS = re.compile(r"[0-9]")
# A run of dots is held as "DOT...DOTMULTI" while the other rules run (the
# text is lowercase by then, so the marker cannot clash with it).
_DOT_RUN = re.compile(r"\.{2,}")
_DOT_MARKER = re.compile(r"(?:DOT)+MULTI")
_FINAL_DOT_QUOTE = re.compile(r"\.' ?$")
_NUMERIC_ONLY = re.compile(r"(.*)\s+#NUMERIC_ONLY#")


@functools.cache
def _sacremoses():
    return extras.import_extra(
        "sacremoses", "fairseq-text", "The TUPE authors' tokenization"
    )


@functools.cache
def _punctuation_rules():
    normalizer = _sacremoses().MosesPunctNormalizer(lang="en", perl_parity=True)
    # The perl script reads bytes (no `use utf8`), so its \d is ASCII.
    return [
        (re.compile("(?a)" + pattern), replacement)
        for pattern, replacement in normalizer.substitutions
    ]


@functools.cache
def _nonbreaking_prefixes():
    """tokenizer.perl's prefixes: 1 = always, 2 = only before a number."""
    words = _sacremoses().corpus.NonbreakingPrefixes().words("en")
    prefixes = {}
    for word in words:
        numeric_only = _NUMERIC_ONLY.match(word)
        if numeric_only:
            prefixes[numeric_only.group(1)] = 2
        else:
            prefixes[word] = 1
    return prefixes


def normalize_punctuation(text):
    """`normalize-punctuation.perl en` on one line (without its newline)."""
    for pattern, replacement in _punctuation_rules():
        text = pattern.sub(replacement, text)
    return text


def remove_non_printing(text):
    """`remove-non-printing-char.perl`: each control, format, private-use,
    surrogate or unassigned character becomes a space."""
    return regex.sub(r"\p{C}", " ", text)


def _mark_dot_runs(text):
    def marker(match):
        follows = " " if match.end() < len(text) else ""
        return " " + "DOT" * len(match.group()) + "MULTI" + follows

    return _DOT_RUN.sub(marker, text)


def _keeps_period(prefix, next_word):
    """Whether tokenizer.perl leaves `prefix.` whole before `next_word`."""
    kind = _nonbreaking_prefixes().get(prefix)
    return (
        ("." in prefix and _HAS_ALPHA.search(prefix))
        or kind == 1
        or _STARTS_LOWERCASE.match(next_word)
        or (kind == 2 and _STARTS_DIGITS.match(next_word))
    )


def _split_periods(text):
    # perl's `split(/\s/)`: a doubled space leaves an empty word (which the
    # next word's check then sees), trailing empty words are dropped.
    words = text.split(" ")
    while words and not words[-1]:
        words.pop()
    for i, word in enumerate(words):
        if len(word) > 1 and word.endswith("."):
            prefix = word[:-1]
            if i == len(words) - 1 or not _keeps_period(prefix, words[i + 1]):
                words[i] = prefix + " ."
    return " ".join(words)


def tokenize_english(text):
    """`tokenizer.perl -no-escape -l en` on one line (without its newline).

    Args:
        text: str, lowercase as the authors' pipeline has it by then.

    Returns:
        str: the tokens, separated by single spaces.

    Example:
    >>> tokenize_english("don't stop...")  # doctest: +SKIP
    "don 't stop ..."
    """
    if not regex.sub(r"\s", "", text):
        return text  # perl prints blank lines as they are
    text = regex.sub(r"\s+", " ", f" {text} ")
    text = re.sub(r"[\000-\037]", "", text)
    text = re.sub(" +", " ", text).removeprefix(" ").removesuffix(" ")
    text = _mark_dot_runs(_PAD_SPECIAL.sub(r" \1 ", text))
    for pattern, replacement in _COMMA_RULES + _ENGLISH_APOSTROPHE_RULES:
        text = pattern.sub(replacement, text)
    text = _split_periods(text)
    text = re.sub(" +", " ", text).removeprefix(" ").removesuffix(" ")
    text = _FINAL_DOT_QUOTE.sub(" . ' ", text, count=1)
    return _DOT_MARKER.sub(lambda m: "." * ((len(m.group()) - 5) // 3), text)
