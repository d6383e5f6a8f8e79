"""The one place tupe-tf uses keras-hub internals (`keras_hub.src`, private
members).

keras-hub 0.32 has no public form of these; each is used for the reason
given, and every other module reaches it through here, so a keras-hub
upgrade that moves one breaks exactly this module.

- `gelu_approximate`: the registered tanh-GELU of keras-hub's BERT, so a
  `TupeBackbone(position_encoding="bert")` serializes the same activation
  and equals `keras_hub.models.BertBackbone` with copied weights.
- `ENCODER_ATTENTION_ATTRIBUTE`, `transformer_encoder_sublayers`:
  `keras_hub.layers.TransformerEncoder.build` creates its sublayers (a
  `keras.layers.MultiHeadAttention`, layer norms, dense and dropout
  layers) in private attributes and has no hook for another attention
  layer, nor accessors for them. `BiasedTransformerEncoder` builds through
  the parent's `build` (so it keeps every argument the parent honours):
  it swaps the attention for a `BiasedMultiHeadAttention` when the parent
  assigns it to `ENCODER_ATTENTION_ATTRIBUTE`, and its `call` (which takes
  the attention bias) reads the sublayers here.
- `MAX_BYTES_PER_WORD`, `pretokenize`: the WordPiece tokenizer's word
  splitting, reproduced exactly by the exported TF-Hub preprocessor.
- `add_special_token`, `update_special_token_ids`, `use_tf_workflow`: the
  `keras_hub.tokenizers.Tokenizer` methods (private) that keras-hub's own
  tokenizers call to declare a special token (its `<name>` and
  `<name>_id` attributes, checked against the vocabulary) and to choose
  between the TensorFlow and the pure-Python path; `TupeFairseqTokenizer`
  is such a tokenizer and must behave as they do.
"""

import collections

from keras_hub.src.tokenizers.word_piece_tokenizer import MAX_BYTES_PER_WORD
from keras_hub.src.tokenizers.word_piece_tokenizer import pretokenize
from keras_hub.src.utils.keras_utils import gelu_approximate

__all__ = [
    "ENCODER_ATTENTION_ATTRIBUTE",
    "ENCODER_SUBLAYER_NAMES",
    "MAX_BYTES_PER_WORD",
    "EncoderSublayers",
    "add_special_token",
    "gelu_approximate",
    "pretokenize",
    "transformer_encoder_sublayers",
    "update_special_token_ids",
    "use_tf_workflow",
]

# The attribute `TransformerEncoder.build` assigns its attention layer to.
ENCODER_ATTENTION_ATTRIBUTE = "_self_attention_layer"
# The names `TransformerEncoder.build` gives its sublayers (the paths of
# their variables), each also the private attribute holding it, with a
# leading underscore.
ENCODER_SUBLAYER_NAMES = (
    "self_attention_layer",
    "self_attention_layer_norm",
    "self_attention_dropout",
    "feedforward_layer_norm",
    "feedforward_intermediate_dense",
    "feedforward_output_dense",
    "feedforward_dropout",
)
EncoderSublayers = collections.namedtuple(
    "EncoderSublayers", ENCODER_SUBLAYER_NAMES
)


def transformer_encoder_sublayers(encoder):
    """The sublayers of a built `TransformerEncoder` (or subclass), an
    `EncoderSublayers` named by `ENCODER_SUBLAYER_NAMES`."""
    return EncoderSublayers(
        *(getattr(encoder, "_" + name) for name in ENCODER_SUBLAYER_NAMES)
    )


def add_special_token(tokenizer, token, name):
    """Declares `token` as `tokenizer`'s special token `name` (the `name`
    and `name_id` attributes, the id set once there is a vocabulary)."""
    tokenizer._add_special_token(token, name)


def update_special_token_ids(tokenizer):
    """Sets the `<name>_id` of every declared special token from the
    vocabulary (a `ValueError` for a token the vocabulary lacks)."""
    tokenizer._update_special_token_ids()


def use_tf_workflow(tokenizer):
    """Whether `tokenizer` runs its TensorFlow path (inside a `tf.function`
    or `tf.data`, or when built for it) rather than pure Python."""
    return tokenizer._use_tf_workflow()
