"""Base class of the content-free (position-only) attention layers."""

import keras
import numpy as np
from keras import ops

from tupe_tf.layers.sequence_length import checked_sequence_length
from tupe_tf.utils.keyword_arguments import refuse_unknown_keywords


class PositionBiasLayer(keras.layers.Layer):
    """A layer whose output depends only on its weights and the length.

    Subclasses implement `compute_bias(sequence_length)`. Attention bias
    layers return a float32 tensor `(units, 1, heads, n, n)` (`units` is 1
    when all layers share the bias, else `num_layers`; `heads` is 1 when the
    heads share it); query/key transform layers return the tensor their
    attention argument takes. Either kind also gives `content_free_bias(n)`,
    the position-only part of the logits in the bias layout, for inspection
    and figures. The layer is called
    on any tensor whose axis 1 is the sequence (normally `token_ids`), so it
    fits a functional graph. The output is computed once per forward pass and
    shared by every transformer layer that uses it.

    Because the output is content-free, it can be folded into a constant for
    a fixed length (`fold(lengths)`): exported inference graphs then pay
    nothing for positions. A folded layer ignores later weight updates until
    `unfold()`; folding is for inference and export only.

    Args:
        max_sequence_length: int. The longest sequence the layer supports.
        **kwargs: other keyword arguments passed to `keras.layers.Layer`.

    Call arguments (every subclass):
        inputs: any tensor of shape `(batch, n, ...)`; only `n` is used.
    """

    def __init__(self, max_sequence_length, **kwargs):
        # The bias is always built in float32 (SPEC); it is cast where it
        # meets the attention logits.
        refuse_unknown_keywords(type(self), kwargs)
        kwargs["dtype"] = "float32"
        super().__init__(**kwargs)
        self.max_sequence_length = int(max_sequence_length)
        self._folded = {}

    def compute_bias(self, sequence_length):
        raise NotImplementedError

    def bias_shape(self, sequence_length):
        """The shape of `compute_bias(n)`; `n` may be None (unknown).

        `(1, 1, num_heads, n, n)`, one bias for every layer; subclasses with
        another layout override it.
        """
        return (1, 1, self.num_heads, sequence_length, sequence_length)

    def compute_output_shape(self, input_shape):
        # Declared, not inferred: JAX's shape inference cannot prove that a
        # slice of a `max_sequence_length` table has the input's length.
        return self.bias_shape(input_shape[1])

    def content_free_bias(self, sequence_length):
        """The position-only logits `(units, 1, heads, n, n)`, float32.

        For a bias layer this is its output; query/key transform layers
        override it.
        """
        return self.compute_bias(sequence_length)

    def call(self, inputs):
        length = checked_sequence_length(inputs, self.max_sequence_length)
        if isinstance(length, int) and length in self._folded:
            return keras.tree.map_structure(
                ops.convert_to_tensor, self._folded[length]
            )
        return self.compute_bias(length)

    def fold(self, sequence_lengths):
        """Freezes the output for each length in `sequence_lengths`."""
        for length in sequence_lengths:
            value = self.compute_bias(int(length))
            self._folded[int(length)] = keras.tree.map_structure(
                lambda t: np.asarray(ops.convert_to_numpy(t)), value
            )

    def unfold(self):
        """Drops folded constants; the output follows the weights again."""
        self._folded = {}

    def get_config(self):
        config = super().get_config()
        config.pop("dtype", None)
        config.update({"max_sequence_length": self.max_sequence_length})
        return config
