"""The one place tupe-tf imports keras-hub internals (`keras_hub.src`).

keras-hub 0.32 does not export these names; each is used for the reason
given, and every other module imports it from here, so a keras-hub upgrade
that moves one breaks exactly one import.

- `gelu_approximate`: the registered tanh-GELU of keras-hub's BERT, so a
  `TupeBackbone(position_encoding="bert")` serializes the same activation
  and equals `keras_hub.models.BertBackbone` with copied weights.
- `clone_initializer`: what keras-hub's `TransformerEncoder.build` uses to
  give every sublayer its own initializer instance; our encoder rebuilds
  the same sublayers and must initialize them the same way.
- `MAX_BYTES_PER_WORD`, `pretokenize`: the WordPiece tokenizer's word
  splitting, reproduced exactly by the exported TF-Hub preprocessor.
"""

from keras_hub.src.tokenizers.word_piece_tokenizer import MAX_BYTES_PER_WORD
from keras_hub.src.tokenizers.word_piece_tokenizer import pretokenize
from keras_hub.src.utils.keras_utils import clone_initializer
from keras_hub.src.utils.keras_utils import gelu_approximate

__all__ = [
    "MAX_BYTES_PER_WORD",
    "clone_initializer",
    "gelu_approximate",
    "pretokenize",
]
