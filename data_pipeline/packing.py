"""FULL-SENTENCES packing (RoBERTa, Liu et al. 2019; used by TUPE).

Consecutive sentences are packed, across document boundaries, into
`[CLS] ... [SEP]` sequences of at most `max_seq_length` tokens. Inside a
sequence an extra `[SEP]` marks each document boundary. A sentence that does
not fit in the room left starts a new sequence; a sentence longer than a whole
block is split: it first fills the room left in the current sequence, then
whole blocks, and its tail stays in the buffer for the next sentences.
"""

import dataclasses

import numpy as np

from data_pipeline import corpus


@dataclasses.dataclass
class PackingStats:
    """Counters of a packing run."""

    sequences: int = 0
    # Tokens in emitted sequences, `[CLS]`/`[SEP]` included.
    tokens: int = 0
    # Word-piece tokens of the text (no special tokens).
    text_tokens: int = 0
    sentences: int = 0
    documents: int = 0
    split_sentences: int = 0

    def fill_ratio(self, max_seq_length):
        """Real tokens / (sequences * max_seq_length)."""
        if not self.sequences:
            return 0.0
        return self.tokens / (self.sequences * max_seq_length)


class FullSentencesPacker:
    """Packs a stream of tokenized sentences into fixed-budget sequences.

    Args:
      max_seq_length: longest sequence, `[CLS]` and final `[SEP]` included
        (at least 3).
      cls_id: id of `[CLS]`.
      sep_id: id of `[SEP]`.

    Example:
    >>> packer = FullSentencesPacker(8, cls_id=2, sep_id=3)
    >>> out = packer.add(np.array([10, 11, 12]))
    >>> out += packer.add_document_boundary()
    >>> out += packer.add(np.array([20, 21, 22]))
    >>> out += packer.finish()
    >>> [s.tolist() for s in out]
    [[2, 10, 11, 12, 3, 20, 21, 3], [2, 22, 3]]
    """

    def __init__(self, max_seq_length, cls_id, sep_id):
        if max_seq_length < 3:
            raise ValueError(
                f"max_seq_length must be >= 3, got {max_seq_length}."
            )
        self.max_seq_length = max_seq_length
        # Room for text: the sequence also holds [CLS] and the final [SEP].
        self.capacity = max_seq_length - 2
        self._cls = np.array([cls_id], np.int32)
        self._sep = np.array([sep_id], np.int32)
        self._buffer = []
        self._buffer_len = 0
        self._pending_boundary = False
        self._in_document = False
        self.stats = PackingStats()

    def _flush(self, out):
        if not self._buffer_len:
            return
        sequence = np.concatenate([self._cls] + self._buffer + [self._sep])
        self._buffer = []
        self._buffer_len = 0
        self.stats.sequences += 1
        self.stats.tokens += len(sequence)
        out.append(sequence)

    def _append(self, tokens):
        self._buffer.append(tokens)
        self._buffer_len += len(tokens)

    def _split_fill(self, tokens, out):
        """Fills the current sequence with `tokens`, flushing full blocks."""
        while len(tokens):
            room = self.capacity - self._buffer_len
            self._append(tokens[:room])
            tokens = tokens[room:]
            if self._buffer_len == self.capacity:
                self._flush(out)

    def add_document_boundary(self):
        """Marks the end of a document (a blank line). Returns no sequences."""
        if self._in_document:
            self.stats.documents += 1
            self._in_document = False
        # The [SEP] is written lazily, only if the next sentence shares this
        # sequence: a boundary at a sequence end is already marked by its [SEP].
        if self._buffer_len:
            self._pending_boundary = True
        return []

    def add(self, tokens, continuation=False):
        """Adds one sentence's token ids; returns the sequences completed.

        Args:
          tokens: 1-D int array of word-piece ids (no special tokens).
          continuation: the tokens continue the previous sentence (a piece of an
            over-long line); they are appended without a boundary.

        Returns:
          A list of int32 arrays, each `[CLS] ... [SEP]`.
        """
        out = []
        n = len(tokens)
        if not n:
            return out
        tokens = np.asarray(tokens, np.int32)
        self.stats.text_tokens += n
        self._in_document = True
        if continuation:
            self._split_fill(tokens, out)
            return out
        self.stats.sentences += 1
        boundary = 1 if (self._pending_boundary and self._buffer_len) else 0
        self._pending_boundary = False
        room = self.capacity - self._buffer_len
        if n + boundary <= room:
            if boundary:
                self._append(self._sep)
            self._append(tokens)
        elif n <= self.capacity:
            self._flush(out)
            self._append(tokens)
        else:
            self.stats.split_sentences += 1
            if boundary and room > 1:
                self._append(self._sep)
            elif boundary:
                self._flush(out)
            self._split_fill(tokens, out)
        return out

    def finish(self):
        """Flushes the last, partial sequence."""
        out = []
        self.add_document_boundary()
        self._pending_boundary = False
        self._flush(out)
        return out


def pack_token_batches(
    token_batches, max_seq_length, cls_id, sep_id, packer=None
):
    """Packs batches of tokenized lines (see `shards.tokenized_line_batches`).

    Args:
      token_batches: iterable of `(flat_ids, row_splits, kinds)` numpy arrays:
        line `i` has ids `flat_ids[row_splits[i]:row_splits[i+1]]` and kind
        `corpus.NEW_LINE` or `corpus.CONTINUATION`; a `NEW_LINE` with no
        tokens is a document boundary.
      max_seq_length: see `FullSentencesPacker`.
      cls_id: id of `[CLS]`.
      sep_id: id of `[SEP]`.
      packer: optional `FullSentencesPacker` to use (to read its stats).

    Yields:
      int32 arrays `[CLS] ... [SEP]` of length <= `max_seq_length`.
    """
    packer = packer or FullSentencesPacker(max_seq_length, cls_id, sep_id)
    capacity = packer.capacity
    stats = packer.stats
    for flat_ids, row_splits, kinds in token_batches:
        flat_ids = np.asarray(flat_ids, np.int32)
        starts = row_splits[:-1].tolist()
        ends = row_splits[1:].tolist()
        for start, end, kind in zip(starts, ends, kinds.tolist()):
            n = end - start
            if (
                n
                and kind == corpus.NEW_LINE
                and not packer._pending_boundary  # pylint: disable=protected-access
                and packer._buffer_len + n <= capacity
            ):  # pylint: disable=protected-access
                # Fast path of `add` (most lines): the sentence fits, no boundary.
                packer._buffer.append(flat_ids[start:end])  # pylint: disable=protected-access
                packer._buffer_len += n  # pylint: disable=protected-access
                packer._in_document = True  # pylint: disable=protected-access
                stats.text_tokens += n
                stats.sentences += 1
                continue
            if kind == corpus.CONTINUATION:
                out = packer.add(flat_ids[start:end], continuation=True)
            elif not n:
                out = packer.add_document_boundary()
            else:
                out = packer.add(flat_ids[start:end])
            yield from out
    yield from packer.finish()
