"""Classifier preprocessor of the TUPE authors' fairseq pipeline."""

import keras
from keras_hub.layers import MultiSegmentPacker

from tupe_tf.models.fairseq.tupe_fairseq_tokenizer import TupeFairseqTokenizer
from tupe_tf.models.tupe_text_classifier_preprocessor import (
    TupeTextClassifierPreprocessor,
)


@keras.saving.register_keras_serializable(package="tupe_tf")
class TupeFairseqTextClassifierPreprocessor(TupeTextClassifierPreprocessor):
    """Packs sentences as the authors' fairseq fine-tuning does.

    Their `sentence_prediction` task with `--init-token 0
    --separator-token 2` feeds `<s> a </s>` and, for pairs,
    `<s> a </s> </s> b </s>`, padded with `<pad>` (id 1); this packs the
    same (segment ids 0 for the first sentence and its separators, 1 for
    the second; their model has no segment input, a `TupeBackbone` with
    `segment_encoding="none"` ignores them). Their pipeline does not
    truncate; this truncates to `sequence_length` as keras-hub does.
    The tokenizer runs in Python (`tf.py_function` inside `tf.data`).

    Args:
        tokenizer: a `tupe_tf.TupeFairseqTokenizer`.
        sequence_length: int. Packed length.
        **kwargs: other arguments of `TupeTextClassifierPreprocessor`
            (`truncate`, ...).

    Example:
    ```python
    preprocessor = tupe_tf.TupeFairseqTextClassifierPreprocessor(
        tupe_tf.TupeFairseqTokenizer(
            dictionary="tupe/dict.txt", bpe_codes="tupe/bpe-code"),
        sequence_length=128)
    x = preprocessor(["A sentence."])
    # A tuple passed positionally reads as (x, y): pass pairs as `x=`.
    x = preprocessor(x=(["A premise."], ["A hypothesis."]))
    ```
    """

    tokenizer_cls = TupeFairseqTokenizer

    def build(self, input_shape):
        super().build(input_shape)
        self.packer = MultiSegmentPacker(
            start_value=self.tokenizer.start_token_id,
            end_value=self.tokenizer.end_token_id,
            sep_value=[self.tokenizer.end_token_id] * 2,
            pad_value=self.tokenizer.pad_token_id,
            truncate=self.truncate,
            sequence_length=self.sequence_length,
        )
