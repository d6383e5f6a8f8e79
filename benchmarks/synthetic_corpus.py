"""Generated corpora for the data benchmarks (vocabulary, shards at scale).

Paragraphs of the embedded gensim Wikipedia sample in a seeded random
order, each word replaced with probability `perturb` by a perturbed variant
(a letter substituted, inserted or dropped, or two letters appended), so
that the number of distinct words grows with the corpus as in real text,
which one file repeated would not do.

Example:

>>> meta = generate_corpus("/tmp/corpus-32mb.txt", 32)  # doctest: +SKIP
>>> meta["distinct_space_separated_words"]  # doctest: +SKIP
"""

import json
import os
import random

_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _perturbed(word, rng):
    kind = rng.randrange(4)
    i = rng.randrange(len(word) + 1)
    if kind == 0 and i < len(word):  # substitute
        return word[:i] + rng.choice(_LETTERS) + word[i + 1 :]
    if kind == 1:  # insert
        return word[:i] + rng.choice(_LETTERS) + word[i:]
    if kind == 2 and len(word) > 3 and i < len(word):  # drop
        return word[:i] + word[i + 1 :]
    return word + rng.choice(_LETTERS) + rng.choice(_LETTERS)


def _document(paragraphs, rng, perturb):
    doc = []
    for _ in range(rng.randint(3, 12)):
        words = rng.choice(paragraphs).split(" ")
        doc.append(
            " ".join(
                _perturbed(w, rng)
                if w.isalpha() and rng.random() < perturb
                else w
                for w in words
            )
        )
    return "\n".join(doc) + "\n\n"


def generate_corpus(path, size_mb, perturb=0.05, seed=0):
    """Writes about `size_mb` MiB of text to `path` (once: a later call
    reads the `path + ".json"` it left); returns its bytes and distinct
    space-separated words."""
    from data_pipeline import corpus  # pylint: disable=g-import-not-at-top

    meta_path = path + ".json"
    if os.path.exists(meta_path):
        with open(meta_path) as f:
            return json.load(f)
    paragraphs = []
    for _, article in corpus.iter_embedded_articles():
        paragraphs.extend(article)
    rng = random.Random(seed)
    written = 0
    distinct = set()
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        while written < size_mb << 20:
            text = _document(paragraphs, rng, perturb)
            distinct.update(text.split())
            f.write(text)
            written += len(text.encode("utf-8"))
    os.replace(tmp, path)
    meta = {"bytes": written, "distinct_space_separated_words": len(distinct)}
    with open(meta_path, "w") as f:
        json.dump(meta, f)
    return meta
