"""TF Hub-style BERT preprocessor: strings in, packed encoder inputs out.

Tokenization is the same op sequence as the in-memory `TupeTokenizer`
(keras-hub's WordPiece pre-tokenization, then TF-Text WordPiece) and
packing the same as keras-hub's `MultiSegmentPacker` (`[CLS] a [SEP] b
[SEP]`, round-robin truncation), both built from TF-Text ops, so the
SavedModel needs only `tensorflow` and `tensorflow_text` to run. The
vocabulary file is a SavedModel asset.
"""

import os
import tempfile

import tensorflow as tf
import tensorflow_text as tf_text

# keras-hub's own pre-tokenization graph (lowercase, accents, splitting):
# reusing it, rather than TF-Text's `BasicTokenizer`, which orders case
# folding and accent stripping differently, keeps the export token-for-token
# identical to `TupeTokenizer` (keras-hub is pinned in setup.py; the
# import is listed in tupe_tf.layers.keras_hub_internals).
from tupe_tf.export import export_lib
from tupe_tf.export.saved_model_root import SavedModelRoot
from tupe_tf.layers.keras_hub_internals import MAX_BYTES_PER_WORD
from tupe_tf.layers.keras_hub_internals import pretokenize
from tupe_tf.utils.backend import require_tensorflow
from tupe_tf.utils.errors import UserError

INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")
MAX_SEGMENTS = 2


def _token_ids(tokenizer):
    return {
        "cls_id": tokenizer.cls_token_id,
        "sep_id": tokenizer.sep_token_id,
        "pad_id": tokenizer.pad_token_id,
    }


def _check_tokenizer(tokenizer):
    if not tokenizer.split or tokenizer.special_tokens_in_strings:
        raise UserError(
            "Export supports WordPiece tokenizers with `split=True` and "
            "`special_tokens_in_strings=False` (the TupeTokenizer "
            f"defaults). Received: split={tokenizer.split}, "
            f"special_tokens_in_strings={tokenizer.special_tokens_in_strings}"
        )


class BertTextPacker(tf.Module):
    """Tokenizes and packs text for a BERT encoder, with a vocabulary asset.

    Args:
        vocab_file: str. One token per line; becomes a SavedModel asset.
        lowercase: bool. As `TupeTokenizer.lowercase`.
        strip_accents: bool. As `TupeTokenizer.strip_accents`.
        split_on_cjk: bool. As `TupeTokenizer.split_on_cjk`.
        suffix_indicator: str. WordPiece suffix marker, `##`.
        oov_token: str. The unknown token, `[UNK]`.
        cls_id, sep_id, pad_id: int. Ids of `[CLS]`, `[SEP]`, `[PAD]`.

    Example:
    ```python
    packer = BertTextPacker("vocab.txt", lowercase=True, cls_id=2,
                            sep_id=3, pad_id=0)
    tokens = packer.tokenize(tf.constant(["hello world"]))
    inputs = packer.bert_pack_inputs([tokens], seq_length=16)
    ```
    """

    def __init__(
        self,
        vocab_file,
        lowercase,
        cls_id,
        sep_id,
        pad_id,
        strip_accents=True,
        split_on_cjk=True,
        suffix_indicator="##",
        oov_token="[UNK]",
    ):
        super().__init__(name="bert_text_packer")
        self.vocab_file = tf.saved_model.Asset(vocab_file)
        self._lowercase = lowercase
        self._strip_accents = strip_accents
        self._split_on_cjk = split_on_cjk
        self._cls_id = cls_id
        self._sep_id = sep_id
        self._pad_id = pad_id
        initializer = tf.lookup.TextFileInitializer(
            self.vocab_file,
            key_dtype=tf.string,
            key_index=tf.lookup.TextFileIndex.WHOLE_LINE,
            value_dtype=tf.int64,
            value_index=tf.lookup.TextFileIndex.LINE_NUMBER,
        )
        self.vocab_table = tf.lookup.StaticHashTable(
            initializer, default_value=-1
        )
        self.wordpiece = tf_text.WordpieceTokenizer(
            self.vocab_table,
            suffix_indicator=suffix_indicator,
            max_bytes_per_word=MAX_BYTES_PER_WORD,
            token_out_type=tf.int64,
            unknown_token=oov_token,
        )

    def tokenize(self, text):
        """`[batch]` strings -> int32 ragged `[batch, words, wordpieces]`."""
        # Loaded signatures do not check shapes; refuse other ranks here.
        text = tf.ensure_shape(text, [None])
        words = pretokenize(
            text,
            lowercase=self._lowercase,
            strip_accents=self._strip_accents,
            split=True,
            split_on_cjk=self._split_on_cjk,
        )
        return tf.cast(self.wordpiece.tokenize(words), tf.int32)

    def bert_pack_inputs(self, segments, seq_length):
        """Packs 1 or 2 token segments into `[CLS] a [SEP] (b [SEP])`.

        Args:
            segments: list of int32 ragged `[batch, words, wordpieces]` or
                `[batch, wordpieces]`.
            seq_length: int or scalar int32 tensor. Output length; longer
                inputs are truncated round-robin (one token at a time from
                each segment that still has tokens, as keras-hub's
                `MultiSegmentPacker`).

        Returns:
            Dict of int32 `[batch, seq_length]`: `input_word_ids`,
            `input_mask` (1 for real tokens), `input_type_ids` (segment).
        """
        segments = [
            s.merge_dims(-2, -1) if s.shape.rank == 3 else s for s in segments
        ]
        num_special_tokens = len(segments) + 1  # [CLS] and one [SEP] each.
        trimmed = tf_text.RoundRobinTrimmer(
            seq_length - num_special_tokens
        ).trim(segments)
        word_ids, type_ids = tf_text.combine_segments(
            trimmed,
            start_of_sequence_id=self._cls_id,
            end_of_segment_id=self._sep_id,
        )
        # Both ragged tensors are padded from the packed ids, each with its
        # own pad value; the mask comes from the word ids.
        input_word_ids, input_mask = tf_text.pad_model_inputs(
            word_ids, max_seq_length=seq_length, pad_value=self._pad_id
        )
        input_type_ids, _ = tf_text.pad_model_inputs(
            tf.cast(type_ids, tf.int32),
            max_seq_length=seq_length,
            pad_value=0,
        )
        return {
            "input_word_ids": tf.cast(input_word_ids, tf.int32),
            "input_mask": tf.cast(input_mask, tf.int32),
            "input_type_ids": input_type_ids,
        }

    def preprocess(self, texts, seq_length):
        """Strings (one tensor per segment) -> packed encoder inputs."""
        return self.bert_pack_inputs(
            [self.tokenize(t) for t in texts], seq_length
        )


def text_packer_from_tokenizer(tokenizer, vocab_dir):
    """A `BertTextPacker` configured like `tokenizer` (a `TupeTokenizer`).

    The vocabulary is written to `vocab_dir/vocab.txt`, which must exist
    until the SavedModel is saved (the save copies it as an asset).
    """
    _check_tokenizer(tokenizer)
    vocab_file = os.path.join(vocab_dir, "vocab.txt")
    with open(vocab_file, "w", encoding="utf-8") as f:
        f.write("".join(token + "\n" for token in tokenizer.get_vocabulary()))
    return BertTextPacker(
        vocab_file,
        lowercase=tokenizer.lowercase,
        strip_accents=tokenizer.strip_accents,
        split_on_cjk=tokenizer.split_on_cjk,
        suffix_indicator=tokenizer.suffix_indicator,
        oov_token=tokenizer.oov_token,
        **_token_ids(tokenizer),
    )


def _ragged_specs(num_segments, rank):
    return [
        tf.RaggedTensorSpec([None] * rank, tf.int32, ragged_rank=rank - 1)
        for _ in range(num_segments)
    ]


def build_hub_preprocessor(packer, seq_length):
    """The reusable SavedModel object of a TF Hub-style preprocessor.

    Args:
        packer: a `BertTextPacker`.
        seq_length: int. Length of `__call__`'s outputs, and the default of
            `bert_pack_inputs`.

    Returns:
        A trackable with `__call__(text)` (a `[batch]` string tensor, or a
        list of one or two) returning the packed inputs at `seq_length`,
        `tokenize(text)`, `bert_pack_inputs(segments, seq_length=...)`,
        `vocab_file` and empty `variables` lists (TF Hub's reusable
        SavedModel API).
    """
    require_tensorflow("TF Hub preprocessor export")
    root = SavedModelRoot()
    root.packer = packer
    root.vocab_file = packer.vocab_file
    root.variables = []
    root.trainable_variables = []
    root.regularization_losses = []

    text_spec = tf.TensorSpec([None], tf.string, name="text")

    # The packer branches on Python values only: AutoGraph's source
    # conversion (slower than the trace) is skipped.
    @tf.function(autograph=False)
    def call(text):
        texts = list(text) if isinstance(text, (list, tuple)) else [text]
        return packer.preprocess(texts, seq_length)

    call.get_concrete_function(text_spec)
    for num_segments in range(1, MAX_SEGMENTS + 1):
        call.get_concrete_function([text_spec] * num_segments)

    tokenize = tf.function(
        packer.tokenize, input_signature=[text_spec], autograph=False
    )

    @tf.function(autograph=False)
    def bert_pack_inputs(segments, seq_length=seq_length):
        return packer.bert_pack_inputs(list(segments), seq_length)

    length_spec = tf.TensorSpec([], tf.int32, name="seq_length")
    for num_segments in range(1, MAX_SEGMENTS + 1):
        for rank in (2, 3):
            bert_pack_inputs.get_concrete_function(
                _ragged_specs(num_segments, rank), length_spec
            )
    root.__call__ = call
    root.tokenize = tokenize
    root.bert_pack_inputs = bert_pack_inputs
    return root


def export_hub_preprocessor(
    tokenizer, export_dir, seq_length=128, overwrite=False
):
    """Writes a TF Hub-style preprocessor SavedModel.

    Args:
        tokenizer: a `tupe_tf.TupeTokenizer`.
        export_dir: str. Output directory (written atomically).
        seq_length: int. Default packed length.
        overwrite: bool. Replace an existing `export_dir`.

    Example:
    ```python
    export_hub_preprocessor(tokenizer, "out/preprocessor", seq_length=128)
    preprocessor = tf.saved_model.load("out/preprocessor")
    inputs = preprocessor(tf.constant(["hello world"]))
    ```
    """
    require_tensorflow("TF Hub preprocessor export")
    with tempfile.TemporaryDirectory() as vocab_dir:
        packer = text_packer_from_tokenizer(tokenizer, vocab_dir)
        root = build_hub_preprocessor(packer, seq_length)
        with export_lib.atomic_export_dir(export_dir, overwrite) as tmp_dir:
            tf.saved_model.save(
                root,
                tmp_dir,
                signatures={
                    "serving_default": root.__call__.get_concrete_function(
                        tf.TensorSpec([None], tf.string, name="text")
                    )
                },
            )
            export_lib.write_export_metadata(
                tmp_dir, format="hub_preprocessor", seq_length=seq_length
            )
