"""Sequence-length checks shared by the positional layers and the backbone."""

import keras
from keras import ops


def checked_sequence_length(tensor, max_sequence_length, axis=1):
    """Returns `tensor.shape[axis]`, refusing lengths above the maximum.

    A static length is checked in Python. JAX and PyTorch always run on
    static shapes (so does XLA), which makes that the only check they need;
    their symbolic lengths (JAX's shape inference) are returned unchecked,
    to be checked when the layer runs on data. TensorFlow graphs may have a
    dynamic length: it gets a graph assertion, so a too-long batch fails
    with a message that says so instead of an index error from deep inside
    a gather.

    Args:
        tensor: a tensor whose `axis` dimension is the sequence length.
        max_sequence_length: int. The largest length the model supports.
        axis: int. The sequence axis.

    Returns:
        The length: a Python int if static, else a scalar int32 tensor
        (TensorFlow) or the backend's symbolic dimension.
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
    if keras.backend.backend() != "tensorflow":
        return length
    import tensorflow as tf  # only TensorFlow graphs have dynamic lengths

    assertion = tf.debugging.assert_less_equal(
        length, max_sequence_length, message=message
    )
    with tf.control_dependencies([assertion]):
        return tf.identity(length)
