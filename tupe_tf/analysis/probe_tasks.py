"""Position probes: tasks whose answer depends on positions (pure NumPy).

Four synthetic tasks, generated from the package's vocabulary and text
(`probe_data`) with a seed, deterministic and without download:

- `copy` (alignment): `[CLS] x_1 .. x_m [SEP] [MASK] x m [SEP]`; predict
  `x_i` at the `i`-th mask. The span's tokens are distinct, drawn from the
  `COPY_POOL_SIZE` most frequent tokens (the head's classes). The masks
  are identical tokens, so a model without positions gives them identical
  outputs: its accuracy is at most `1 / m`.
- `order` (local order): the words `A B` next to each other in a run of
  one filler word, in this order or swapped (`B A`); predict which, at
  `A`.
- `distance` (local distance): `A` and `B` in a run of one filler word;
  predict at `A` whether they are at most `k` tokens apart (the others
  are `k + 1 .. 3k` apart).
- `passkey` (retrieval at a depth): `[CLS] [MASK] x 5 [SEP] text [SEP]`,
  the phrase `the key is d d d d d .` at a random depth of real text
  (digit tokens removed); predict the `i`-th digit at the `i`-th mask, on
  the `[CLS]` side of the text.

In `order` and `distance` the bag of tokens is the same for both labels,
and nothing but `A` and `B` varies: the answer depends on positions alone
(with real text around the pair, models of this size stayed at chance
within the probes' budget: what they measured was finding the pair).

Every example at length `n` is between `n // 2 + 1` and `n` tokens long
(then padded to `n`), so the evaluations at `2L, 4L, 8L` hold only lengths
that training at `L` never saw. Each task's `chance` is the accuracy of the
best predictor that sees the bag of tokens and not their positions,
computed on the examples themselves: `1 / m` pooled for `copy`, the
majority label (0.5) for `order` and `distance`, the most frequent digit of
the key for `passkey` (about 0.35, above the 0.1 of guessing: the bag says
which digits the key holds). A model without positions (`nope`) must not
beat it: the probes' leak check.

Example:

>>> text = probe_text_for_tests()
>>> examples = make_examples("distance", text, 32, 8, seed=0, split="train")
>>> examples.inputs["token_ids"].shape, examples.chance
((8, 32), 0.5)
"""

import dataclasses
import functools
from typing import Optional

import numpy as np

TASKS = ("copy", "order", "distance", "passkey")
SPLITS = ("train", "heldout")
KEY_DIGITS = 5
# The passkey's phrase around the digits, and the distance task's markers.
PASSKEY_PREFIX = ("the", "key", "is")
PASSKEY_SUFFIX = (".",)
MARKERS = ("x", "y")
FILLER = "the"
# Tokens `copy` draws its spans from (its classes): the most frequent.
COPY_POOL_SIZE = 1024


@dataclasses.dataclass(frozen=True, eq=False)
class ProbeText:
    """The vocabulary and token streams the probes are generated from.

    Attributes:
        tokens: the vocabulary, one string per id.
        train_ids: int32 token stream of the study's training documents
            (`passkey`'s training texts are cut from it, `copy`'s pool is
            its most frequent tokens).
        heldout_ids: int32 token stream of its held-out documents
            (`passkey`'s evaluation texts are cut from it).
    """

    tokens: tuple
    train_ids: np.ndarray
    heldout_ids: np.ndarray

    @property
    def vocabulary_size(self):
        return len(self.tokens)

    @functools.cached_property
    def kinds(self):
        """`token_kinds(self.tokens)`, computed once."""
        return token_kinds(self.tokens)

    @functools.cached_property
    def _index(self):
        return {token: i for i, token in enumerate(self.tokens)}

    def id_of(self, token):
        """The id of `token` (`KeyError` naming it when absent)."""
        return self._index[token]

    def copy_pool(self, size):
        """The `size` most frequent non-special tokens of the training
        stream, most frequent first: the tokens of `copy`'s spans."""
        counts = np.bincount(self.train_ids, minlength=self.vocabulary_size)
        counts[self.kinds["special"]] = -1
        pool = np.argsort(-counts, kind="stable")[:size]
        if counts[pool].min() < 0:
            raise ValueError(f"The vocabulary has fewer than {size} tokens.")
        return pool

    def stream(self, split):
        """The token stream examples of `split` are cut from."""
        return self.train_ids if split == "train" else self.heldout_ids


def token_kinds(tokens):
    """Per-id boolean arrays: `special` (`[...]`), `digit` (holds a digit).

    Example:

    >>> token_kinds(["[CLS]", "19", "##84", "key"])["digit"].tolist()
    [False, True, True, False]
    """
    return {
        "special": np.array(
            [t.startswith("[") and t.endswith("]") for t in tokens]
        ),
        "digit": np.array([any(c.isdigit() for c in t) for t in tokens]),
    }


@dataclasses.dataclass
class Examples:
    """A probe's examples at one length.

    Attributes:
        inputs: `token_ids`, `segment_ids`, `padding_mask` (int32 `[num,
            n]`) and `mask_positions`, where the answers are read
            (`[num, m_max]` for copy, `[num, 5]` for passkey, `A`'s
            position `[num, 1]` for order and distance).
        labels: int32 `[num, 1]` (order, distance: the class),
            `[num, m_max]` (copy: the span's tokens) or `[num, 5]`
            (passkey: digits).
        weights: float32 like `labels` for `copy` (1 for a real mask, 0
            for padding), else None.
        chance: the best accuracy without positions (module docstring).
    """

    inputs: dict
    labels: np.ndarray
    weights: Optional[np.ndarray]
    chance: float


def example_rng(seed, task, split, length):
    """The generator of one task's examples: a function of all four, so
    every variant trained with a seed sees the same examples."""
    return np.random.default_rng(
        [seed, TASKS.index(task), SPLITS.index(split), length]
    )


def make_examples(task, text, length, num_examples, seed, split, **options):
    """`num_examples` examples of `task` at `length` (deterministic).

    Args:
        task: one of `TASKS`.
        text: a `ProbeText`.
        length: `n`, the padded length; examples are `n // 2 + 1 .. n`
            tokens long.
        num_examples: how many.
        seed: int.
        split: `train` or `heldout` (which text, and another stream).
        **options: the task's own settings (`distance`: `k`).

    Returns:
        `Examples`.
    """
    rng = example_rng(seed, task, split, length)
    return GENERATORS[task](text, length, num_examples, rng, split, **options)


def example_lengths(rng, length, num):
    """Each example's length, uniform in `n // 2 + 1 .. n`."""
    return rng.integers(length // 2 + 1, length + 1, size=num)


def _packed(rows, lengths, length, segment_starts=None):
    """`inputs` from `rows` (`[num, >= n]`, valid up to `lengths`)."""
    positions = np.arange(length)[None, :]
    valid = positions < lengths[:, None]
    if rows.shape[1] < length:
        rows = np.pad(rows, [(0, 0), (0, length - rows.shape[1])])
    token_ids = np.where(valid, rows[:, :length], 0).astype("int32")
    segment_ids = np.zeros_like(token_ids)
    if segment_starts is not None:
        starts = np.broadcast_to(segment_starts, lengths.shape)[:, None]
        segment_ids = (valid & (positions >= starts)).astype("int32")
    return {
        "token_ids": token_ids,
        "segment_ids": segment_ids,
        "padding_mask": valid.astype("int32"),
    }


def bag_ceiling(labels, weights=None):
    """Pooled accuracy of predicting each row's most frequent label
    everywhere in the row: the best a position-blind model can do when
    a row's labels are a bag it sees (copy, passkey).

    Example:

    >>> bag_ceiling(np.array([[3, 3, 1], [0, 1, 2]]))
    0.5
    """
    labels = np.asarray(labels, "int64")
    valid = np.ones(labels.shape, bool) if weights is None else weights > 0
    # Padding gets distinct negative values: it never forms a run.
    slots = np.arange(labels.shape[1])[None, :]
    ordered = np.sort(np.where(valid, labels, -1 - slots), axis=1)
    same = ordered[:, 1:] == ordered[:, :-1]
    runs = np.cumsum(same, axis=1)
    # Length of the run of equal neighbours ending at each slot.
    runs = runs - np.maximum.accumulate(np.where(same, 0, runs), axis=1)
    best = 1 + runs.max(axis=1, initial=0)
    return float(best.sum() / valid.sum())


def _balanced_labels(rng, num):
    """Half ones, half zeros, in a random order (majority exactly 0.5)."""
    return rng.permutation(np.arange(num) % 2).astype("int32")


def _distinct_rows(rng, pool, num, width):
    """`[num, width]` draws from `pool`, the tokens of each row distinct:
    a token that repeats one before it in its row is drawn again."""
    if width > len(pool):
        raise ValueError(
            f"{width} distinct tokens asked of a pool of {len(pool)}."
        )
    rows = pool[rng.integers(len(pool), size=(num, width))]
    while True:
        order = np.argsort(rows, axis=1, kind="stable")
        ordered = np.take_along_axis(rows, order, axis=1)
        repeats = np.zeros(rows.shape, bool)
        np.put_along_axis(
            repeats, order[:, 1:], ordered[:, 1:] == ordered[:, :-1], axis=1
        )
        if not repeats.any():
            return rows
        rows[repeats] = pool[rng.integers(len(pool), size=int(repeats.sum()))]


def _specials(text):
    return text.id_of("[CLS]"), text.id_of("[SEP]"), text.id_of("[MASK]")


def copy_examples(text, length, num, rng, split, pool_size=COPY_POOL_SIZE):
    """The `copy` task: see the module docstring. Labels index
    `text.copy_pool(pool_size)`."""
    del split  # Random tokens; the split only changes the seed's stream.
    cls, sep, mask = _specials(text)
    pool = text.copy_pool(pool_size)
    spans = (example_lengths(rng, length, num) - 3) // 2
    width = (length - 3) // 2
    indices = _distinct_rows(rng, np.arange(len(pool)), num, width)
    tokens = pool[indices]
    slots = np.arange(width)[None, :]
    weights = (slots < spans[:, None]).astype("float32")
    labels = np.where(weights > 0, indices, 0).astype("int32")
    masks = np.full_like(tokens, mask)
    inputs = _pair_of_segments(tokens, masks, spans, length, cls, sep)
    inputs["mask_positions"] = np.where(
        weights > 0, spans[:, None] + 2 + slots, 0
    ).astype("int32")
    return Examples(inputs, labels, weights, bag_ceiling(labels, weights))


def order_examples(text, length, num, rng, split):
    """The `order` task: see the module docstring."""
    del split  # One filler token; the split only changes the seed's stream.
    labels = _balanced_labels(rng, num)
    lengths = example_lengths(rng, length, num)
    first = (rng.random(num) * (lengths - 3)).astype("int64")
    in_order = labels == 1
    return _markers_in_filler(
        text,
        length,
        lengths,
        np.where(in_order, first, first + 1),
        np.where(in_order, first + 1, first),
        labels,
    )


def _markers_in_filler(text, length, lengths, a, b, labels):
    """`[CLS] filler [SEP]` with `A` at `a` and `B` at `b` (0-based
    positions in the filler) in each row."""
    cls, sep, _ = _specials(text)
    widths = lengths - 2
    content = np.full((len(labels), length - 2), text.id_of(FILLER))
    rows = np.arange(len(labels))
    content[rows, a] = text.id_of(MARKERS[0])
    content[rows, b] = text.id_of(MARKERS[1])
    framed = _framed(content, widths, cls, sep)
    inputs = _packed(framed, lengths, length)
    # Read at `A` (after `[CLS]`): its own output attends to `B` directly,
    # where a pooled `[CLS]` would have to relate two other positions.
    inputs["mask_positions"] = (a + 1)[:, None].astype("int32")
    return Examples(inputs, labels[:, None], None, 0.5)


def _pair_of_segments(first, second, spans, length, cls, sep):
    """`[CLS] first[:m] [SEP] second[:m] [SEP]` (segments 0 and 1)."""
    num, width = first.shape
    rows = np.zeros((num, 2 * width + 3), "int64")
    rows[:, 0] = cls
    rows[:, 1 : width + 1] = first
    positions = np.arange(rows.shape[1])[None, :]
    m = spans[:, None]
    rows = np.where(positions == m + 1, sep, rows)
    second_at = np.clip(positions - m - 2, 0, width - 1)
    in_second = (positions > m + 1) & (positions <= 2 * m + 1)
    rows = np.where(
        in_second, np.take_along_axis(second, second_at, axis=1), rows
    )
    rows = np.where(positions == 2 * m + 2, sep, rows)
    return _packed(rows, 2 * spans + 3, length, spans + 2)


def _framed(content, widths, cls, sep):
    """`[CLS] content[:width] [SEP]` per row."""
    num, size = content.shape
    rows = np.zeros((num, size + 2), "int64")
    rows[:, 0] = cls
    rows[:, 1:-1] = content
    ends = widths + 1
    rows[np.arange(num), ends] = sep
    return rows


def distance_pairs(rng, labels, widths, k):
    """Positions `(a, b)` (0-based, inside each row's `widths` content
    tokens) at most `k` apart for label 1, `k + 1 .. 3k` apart for 0."""
    near = rng.integers(1, k + 1, size=len(labels))
    far = rng.integers(k + 1, 3 * k + 1, size=len(labels))
    gaps = np.where(labels == 1, near, far)
    first = (rng.random(len(labels)) * (widths - gaps)).astype("int64")
    a_first = rng.random(len(labels)) < 0.5
    a = np.where(a_first, first, first + gaps)
    b = np.where(a_first, first + gaps, first)
    return a, b


def distance_examples(text, length, num, rng, split, k=4):
    """The `distance` task (`A`, `B` at most `k` apart): module docstring."""
    del split  # One filler token; the split only changes the seed's stream.
    lengths = example_lengths(rng, length, num)
    if lengths.min() - 2 <= 3 * k:
        raise ValueError(
            f"distance k={k} needs examples longer than {3 * k + 2} tokens; "
            f"length {length} gives some of {lengths.min()}."
        )
    labels = _balanced_labels(rng, num)
    a, b = distance_pairs(rng, labels, lengths - 2, k)
    return _markers_in_filler(text, length, lengths, a, b, labels)


def passkey_examples(text, length, num, rng, split):
    """The `passkey` task: see the module docstring."""
    cls, sep, mask = _specials(text)
    ids = text.stream(split)
    filler = ids[~text.kinds["digit"][ids]]
    digit_ids = np.array([text.id_of(str(d)) for d in range(10)])
    labels = rng.integers(0, 10, size=(num, KEY_DIGITS)).astype("int32")
    phrases = np.concatenate(
        [
            _repeated([text.id_of(t) for t in PASSKEY_PREFIX], num),
            digit_ids[labels],
            _repeated([text.id_of(t) for t in PASSKEY_SUFFIX], num),
        ],
        axis=1,
    )
    head = [cls] + [mask] * KEY_DIGITS + [sep]
    lengths = example_lengths(rng, length, num)
    # The text between the masks' [SEP] and the last [SEP].
    widths = lengths - len(head) - 1
    fill = widths - phrases.shape[1]
    if fill.min() < 0:
        raise ValueError(
            f"passkey needs examples of at least {length - fill.min()} "
            f"tokens; length {length} gives some of {lengths.min()}."
        )
    depths = (rng.random(num) * (fill + 1)).astype("int64")
    content = _with_phrase(rng, filler, phrases, depths, length - len(head))
    content[np.arange(num), widths] = sep
    rows = np.concatenate([_repeated(head, num), content], axis=1)
    inputs = _packed(rows, lengths, length, len(head))
    inputs["mask_positions"] = _repeated(
        np.arange(1, KEY_DIGITS + 1), num
    ).astype("int32")
    return Examples(inputs, labels, None, bag_ceiling(labels))


def _repeated(row, num):
    return np.broadcast_to(np.asarray(row, "int64"), (num, len(row))).copy()


def _with_phrase(rng, filler, phrases, depths, width):
    """`[num, width]` windows of `filler` with each row's phrase inserted
    at its depth (the text after it moves right)."""
    num, size = phrases.shape
    starts = rng.integers(0, len(filler) - width, size=num)
    slots = np.arange(width)[None, :]
    offset = slots - depths[:, None]
    in_phrase = (offset >= 0) & (offset < size)
    text = filler[starts[:, None] + slots - size * (offset >= size)]
    phrase = np.take_along_axis(phrases, np.clip(offset, 0, size - 1), 1)
    return np.where(in_phrase, phrase, text)


GENERATORS = {
    "copy": copy_examples,
    "order": order_examples,
    "distance": distance_examples,
    "passkey": passkey_examples,
}


def probe_text_for_tests(num_words=1100, stream_size=4000, seed=0):
    """A small `ProbeText` of made-up words (tests and examples)."""
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    named = [*PASSKEY_PREFIX, *PASSKEY_SUFFIX, *MARKERS]
    named += [str(d) for d in range(10)] + [",", "##s", "##ed", "19", "##84"]
    words = [
        f"w{chr(97 + i % 26)}{chr(97 + i // 26 % 26)}" for i in range(num_words)
    ]
    tokens = tuple(specials + named + words)
    rng = np.random.default_rng(seed)
    content = np.arange(len(specials), len(tokens))
    streams = [
        content[rng.integers(len(content), size=stream_size)].astype("int32")
        for _ in SPLITS
    ]
    return ProbeText(tokens, *streams)
