"""Whole-word masking (`--whole_word_masking`) in the reader and in static
shards: words are masked whole, the budget is kept, and with one token per
word the masks are the per-token ones."""

import dataclasses
import os
import random

import numpy as np
import pytest

from data_pipeline import masking
from data_pipeline import pretraining_dataset
from data_pipeline import shards
from data_pipeline import vocab as vocab_lib
from tests.data_pipeline import conftest
from tests.data_pipeline.test_script_errors import error_line
from tests.data_pipeline.test_scripts import _run
from tupe_tf.utils.errors import UserError

SEQ = conftest.TEST_SEQ_LENGTH
MASK_RATE = 0.2
MAX_PREDICTIONS = 8


def _split_word_text(num_lines=400, seed=0):
    """Lines of known words and of letter strings the vocabulary splits
    into `##` pieces (2 to 6 per word)."""
    rng = random.Random(seed)
    lines = []
    for _ in range(num_lines):
        words = []
        for _ in range(rng.randint(3, 14)):
            if rng.random() < 0.5:
                words.append(rng.choice(conftest.WORDS))
            else:
                letters = "abcdefghijklmnopqrstuvwxyz"
                words.append(
                    "".join(
                        rng.choice(letters) for _ in range(rng.randint(2, 6))
                    )
                )
        lines.append(" ".join(words) + ".")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def split_word_corpus(data_dir):
    path = data_dir / "split_words.txt"
    path.write_text(_split_word_text(), encoding="utf-8")
    return str(path)


def _build(output_dir, corpus_file, vocab_file, **kwargs):
    config = conftest.shard_config(
        corpus_file, vocab_file, output_dir, num_shards=2, seed=7, **kwargs
    )
    return shards.build_shards(config)


def _static(**kwargs):
    return dict(
        static_masking=True,
        mask_rate=MASK_RATE,
        max_predictions_per_seq=MAX_PREDICTIONS,
        **kwargs,
    )


def _batches(directory, vocab_file, **kwargs):
    ds = pretraining_dataset(
        directory,
        vocab_file,
        seq_length=SEQ,
        batch_size=16,
        is_training=False,
        drop_remainder=False,
        seed=3,
        **kwargs,
    )
    for features, mask_ids, weights in ds:
        out = {k: v.numpy() for k, v in features.items()}
        out["mask_ids"] = mask_ids.numpy()
        out["weights"] = weights.numpy()
        yield out


def _check_whole_words(batches, vocabulary):
    """Asserts that no word is partly masked and no row over its budget;
    returns `(masked tokens, budget, masked tokens' new values, labels)`."""
    special = np.array(vocabulary.special_token_ids)
    piece = masking.continuation_table(vocabulary)
    masked_total = budget_total = split_words = 0
    new_values, labels = [], []
    for b in batches:
        rows, slots = np.nonzero(b["weights"])
        positions = b["mask_positions"][rows, slots]
        original = b["token_ids"].copy()
        original[rows, positions] = b["mask_ids"][rows, slots]
        chosen = np.zeros(original.shape, bool)
        chosen[rows, positions] = True
        candidate = (b["padding_mask"] == 1) & ~np.isin(original, special)
        for row in range(len(original)):
            words = _words(original[row], candidate[row], piece)
            split_words += sum(len(w) > 1 for w in words)
            for word in words:
                assert len(set(chosen[row, word])) == 1, (row, word)
            budget = _budget(
                int(candidate[row].sum()), MASK_RATE, MAX_PREDICTIONS
            )
            assert chosen[row].sum() <= budget
            budget_total += budget
        masked_total += len(rows)
        new_values.append(b["token_ids"][rows, positions])
        labels.append(b["mask_ids"][rows, slots])
    assert split_words > 100  # The corpus does test words of several pieces.
    return (
        masked_total,
        budget_total,
        np.concatenate(new_values),
        np.concatenate(labels),
    )


def _budget(num_candidates, mask_rate, max_predictions):
    """masking.py's budget in NumPy: round half up, at least one."""
    if num_candidates <= 0:
        return 0
    wanted = int(np.floor(mask_rate * num_candidates + 0.5))
    return min(max_predictions, max(1, wanted))


def _words(ids, candidate, piece):
    """Each word's positions: a candidate, then the `##` pieces after it."""
    words = []
    for i in np.flatnonzero(candidate):
        if piece[ids[i]] and i > 0 and candidate[i - 1]:
            words[-1].append(i)
        else:
            words.append([i])
    return words


def _check_split(new_values, labels, vocabulary):
    """80% [MASK], 10% a random token, 10% kept, per token."""
    mask = vocabulary.special_ids.mask
    frac_mask = np.mean(new_values == mask)
    frac_random = np.mean((new_values != mask) & (new_values != labels))
    assert 0.74 < frac_mask < 0.86, frac_mask
    assert 0.05 < frac_random < 0.15, frac_random


# Pieces from id 40: many words skipped. With a budget of 3 and words of
# one token rare, a row's budget often needs words past the first
# 2 * max_predictions in order, the ones the fit looks at first.
@pytest.mark.parametrize("first_piece, max_predictions", [(40, 10), (10, 3)])
def test_words_are_chosen_as_bert_chooses_them(first_piece, max_predictions):
    """Against `create_pretraining_data.py`'s loop: words in a random order
    (here: of their first token's score), a word that would exceed the
    budget skipped, until the budget is reached."""
    import tensorflow as tf

    vocab_size, special = 60, [0, 1, 2, 3, 4]
    is_special = masking.special_token_table(vocab_size, special)
    piece = np.zeros(vocab_size, bool)
    piece[first_piece:] = True
    rng = np.random.default_rng(0)
    ids = np.zeros([64, 48], np.int32)
    for row in ids:
        n = rng.integers(5, 49)
        row[:n] = rng.integers(5, vocab_size, size=n)
        row[0], row[n // 2], row[n - 1] = 2, 3, 3
    seed = tf.constant([5, 1], tf.int64)
    _, positions, _, weights = masking.mask_batch(
        ids,
        ids > 0,
        seed,
        mask_rate=0.3,
        max_predictions=max_predictions,
        mask_id=4,
        is_special_table=is_special,
        replacement_id_array=masking.replacement_ids(vocab_size, special),
        continuation_table=piece,
    )
    order_seed = tf.random.experimental.stateless_split(seed, num=3)[0]
    scores = tf.random.stateless_uniform(ids.shape, order_seed).numpy()
    skipped = past_head = 0
    for row in range(len(ids)):
        candidate = (ids[row] > 0) & ~is_special[ids[row]]
        words = _words(ids[row], candidate, piece)
        budget = _budget(int(candidate.sum()), 0.3, max_predictions)
        expected = []
        ordered = sorted(words, key=lambda w: -scores[row, w[0]])
        for index, word in enumerate(ordered):
            if len(expected) >= budget:
                break
            if len(expected) + len(word) <= budget:
                expected += word
                past_head += index >= 2 * max_predictions
            else:
                skipped += 1
        k = int(weights[row].numpy().sum())
        assert positions[row, :k].numpy().tolist() == sorted(expected)
    assert skipped > 20  # The skip rule is exercised.
    if max_predictions == 3:
        assert past_head > 0  # So is the fit over every word.


def test_reader_masks_whole_words_within_the_budget(
    data_dir, split_word_corpus, vocab_file
):
    directory = str(data_dir / "split_words_dynamic")
    _build(directory, split_word_corpus, vocab_file)
    vocabulary = vocab_lib.load_vocabulary(vocab_file)
    masked, budget, new_values, labels = _check_whole_words(
        _batches(
            directory,
            vocab_file,
            mask_rate=MASK_RATE,
            max_predictions_per_seq=MAX_PREDICTIONS,
            whole_word_masking=True,
        ),
        vocabulary,
    )
    # Words that do not fit are skipped, so a row may fall a little short.
    assert 0.9 * budget <= masked <= budget, (masked, budget)
    _check_split(new_values, labels, vocabulary)


def test_static_shards_mask_whole_words_within_the_budget(
    data_dir, split_word_corpus, vocab_file
):
    directory = str(data_dir / "split_words_static")
    manifest = _build(
        directory,
        split_word_corpus,
        vocab_file,
        **_static(whole_word_masking=True),
    )
    assert manifest["static_masking"]["whole_word_masking"] is True
    vocabulary = vocab_lib.load_vocabulary(vocab_file)
    masked, budget, new_values, labels = _check_whole_words(
        _batches(directory, vocab_file), vocabulary
    )
    assert 0.9 * budget <= masked <= budget, (masked, budget)
    _check_split(new_values, labels, vocabulary)


def test_reader_one_token_per_word_equals_per_token(dynamic_shards, vocab_file):
    """The fixture corpus' words are all whole tokens of a vocabulary that
    has `##` pieces: the masks are exactly the per-token ones."""
    directory, _ = dynamic_shards
    per_token = list(_batches(directory, vocab_file))
    whole_word = list(_batches(directory, vocab_file, whole_word_masking=True))
    assert len(per_token) == len(whole_word) > 1
    for a, b in zip(per_token, whole_word):
        assert a.keys() == b.keys()
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def test_static_one_token_per_word_equals_per_token(
    tmp_path, corpus_file, vocab_file
):
    per_token = _build(
        tmp_path / "per_token", corpus_file, vocab_file, **_static()
    )
    whole_word = _build(
        tmp_path / "whole_word",
        corpus_file,
        vocab_file,
        **_static(whole_word_masking=True),
    )
    assert "whole_word_masking" not in per_token["static_masking"]
    assert [s["sha256"] for s in per_token["shards"]] == [
        s["sha256"] for s in whole_word["shards"]
    ]


@pytest.fixture(scope="module")
def no_piece_vocab(data_dir):
    """The test vocabulary without its `##` pieces (the fixture corpus'
    words are whole tokens of it)."""
    return conftest.write_vocab(
        data_dir / "no_pieces.txt",
        drop={"##" + chr(c) for c in range(ord("a"), ord("z") + 1)},
    )


def test_vocabulary_without_pieces_is_refused(
    tmp_path, data_dir, corpus_file, no_piece_vocab
):
    directory = str(data_dir / "no_pieces_dynamic")
    _build(directory, corpus_file, no_piece_vocab)
    with pytest.raises(UserError, match="--whole_word_masking.*no_pieces.txt"):
        pretraining_dataset(
            directory,
            no_piece_vocab,
            seq_length=SEQ,
            batch_size=4,
            whole_word_masking=True,
        )
    output_dir = tmp_path / "static"
    with pytest.raises(UserError, match="--whole_word_masking.*no_pieces.txt"):
        _build(
            output_dir,
            corpus_file,
            no_piece_vocab,
            **_static(whole_word_masking=True),
        )
    assert not output_dir.exists()


def test_whole_word_masking_needs_static_masking(
    tmp_path, corpus_file, vocab_file
):
    with pytest.raises(UserError, match="--whole_word_masking"):
        _build(
            tmp_path / "out", corpus_file, vocab_file, whole_word_masking=True
        )
    assert not (tmp_path / "out").exists()


def test_pretraining_passes_the_flag_and_refuses_without_pieces(
    data_dir, split_word_corpus, vocab_file, no_piece_vocab
):
    from tupe_tf.training import config as config_lib
    from tupe_tf.training import pretrain_data

    directory = str(data_dir / "split_words_pretrain")
    _build(directory, split_word_corpus, vocab_file)
    config = config_lib.PretrainConfig(
        train_files=[directory + "/*.tfrecord"],
        vocab_file=vocab_file,
        seq_length=SEQ,
        mask_rate=MASK_RATE,
        max_predictions_per_seq=MAX_PREDICTIONS,
        eval_steps=12,
        whole_word_masking=True,
    )
    pretrain_data.check_data(config)
    dataset = pretrain_data.make_dataset(
        config, config.train_files, batch_size=16, is_training=False
    )
    batches = []
    for features, mask_ids, weights in dataset:
        batch = {k: v.numpy() for k, v in features.items()}
        batches.append(
            dict(batch, mask_ids=mask_ids.numpy(), weights=weights.numpy())
        )
    _check_whole_words(batches, vocab_lib.load_vocabulary(vocab_file))
    with pytest.raises(UserError, match="--whole_word_masking.*no_pieces.txt"):
        pretrain_data.check_data(
            dataclasses.replace(config, vocab_file=no_piece_vocab)
        )


@pytest.mark.large
def test_build_shards_refuses_a_vocabulary_without_pieces(
    tmp_path, corpus_file, no_piece_vocab
):
    output_dir = tmp_path / "shards"
    result = _run(
        "build_shards.py",
        f"--input={corpus_file}",
        f"--vocab_file={no_piece_vocab}",
        f"--output_dir={output_dir}",
        "--static_masking",
        "--whole_word_masking",
    )
    line = error_line(result)
    assert "--whole_word_masking" in line and no_piece_vocab in line, line
    assert not os.path.exists(output_dir)
