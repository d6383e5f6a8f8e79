"""Sequence-length checks shared by the positional layers and the backbone."""

import tensorflow as tf
from keras import ops


def checked_sequence_length(tensor, max_sequence_length, axis=1):
    """Returns `tensor.shape[axis]`, refusing lengths above the maximum.

    A static length is checked in Python (this is always the case under XLA,
    which needs static shapes); a dynamic one gets a graph assertion, so a
    too-long batch fails with a message that says so instead of an index
    error from deep inside a gather.

    Args:
        tensor: a tensor whose `axis` dimension is the sequence length.
        max_sequence_length: int. The largest length the model supports.
        axis: int. The sequence axis.

    Returns:
        The length: a Python int if static, else a scalar int32 tensor.
    """
    length = ops.shape(tensor)[axis]
    message = (
        f"The input sequence length is longer than the model's "
        f"`max_sequence_length={max_sequence_length}`. Truncate the inputs "
        f"(e.g. the preprocessor's `sequence_length`) or build the backbone "
        f"with a larger `max_sequence_length`."
    )
    if isinstance(length, int):
        if length > max_sequence_length:
            raise ValueError(f"{message} Received length {length}.")
        return length
    assertion = tf.debugging.assert_less_equal(
        length, max_sequence_length, message=message
    )
    with tf.control_dependencies([assertion]):
        return tf.identity(length)
