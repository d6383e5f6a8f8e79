"""T5 relative-position buckets with one learned scalar per bucket and head."""

import math

import keras
import numpy as np
from keras import ops

from tupe_tf.layers.position_bias_layer import PositionBiasLayer


def relative_position_buckets(relative_positions, num_buckets, max_distance):
    """Maps `j - i` to T5's bidirectional buckets (NumPy).

    Half of the buckets serve each direction; distances below
    `num_buckets / 4` get a bucket each, larger ones are log-spaced up to
    `max_distance` and clamped beyond it. Same function as T5's
    `_relative_position_bucket(bidirectional=True)`.

    Args:
        relative_positions: int array of `key_position - query_position`.
        num_buckets: int. Total number of buckets (both directions).
        max_distance: int. Distance from which all fall in the last bucket.

    Returns:
        An int32 array of bucket indices with the shape of the input.
    """
    relative_positions = np.asarray(relative_positions, dtype=np.int64)
    half = num_buckets // 2
    buckets = (relative_positions > 0).astype(np.int64) * half
    distance = np.abs(relative_positions)
    max_exact = half // 2
    # Guard log(0); those entries take the exact branch anyway.
    safe_distance = np.maximum(distance, 1).astype(np.float64)
    log_bucket = max_exact + (
        np.log(safe_distance / max_exact)
        / math.log(max_distance / max_exact)
        * (half - max_exact)
    ).astype(np.int64)
    log_bucket = np.minimum(log_bucket, half - 1)
    buckets += np.where(distance < max_exact, distance, log_bucket)
    return buckets.astype(np.int32)


@keras.saving.register_keras_serializable(package="tupe_tf")
class RelativePositionBias(PositionBiasLayer):
    """Per-head T5 relative-position bias `b_h[bucket(j - i)]`.

    One scalar per (bucket, head), shared by all transformer layers (BERT-R
    and TUPE-R). The bucket index matrix is built once, for the longest
    length, and sliced per batch length: `bucket(j - i)` depends only on
    `j - i`, so the top-left `n x n` block is the matrix for length `n`.

    Args:
        num_heads: int. Number of attention heads.
        max_sequence_length: int. The longest sequence supported.
        num_buckets: int. Number of buckets over both directions (even).
        max_distance: int. Distances beyond it share the last bucket.
        cls_buckets: bool. The TUPE authors' layout for TUPE-R: the table
            gets one more row; the `[CLS]` row (all keys, `[CLS]` included)
            uses bucket `num_buckets / 2`, which `bucket(j - i)` never
            produces, and column 0 of every other row the extra bucket
            `num_buckets`.
        **kwargs: other keyword arguments passed to `keras.layers.Layer`.

    Returns:
        A float32 tensor of shape `(1, 1, num_heads, n, n)`.

    Example:
    ```python
    layer = tupe_tf.layers.RelativePositionBias(
        num_heads=4, max_sequence_length=128)
    bias = layer(np.zeros((2, 16), "int32"))  # (1, 1, 4, 16, 16)
    ```
    """

    def __init__(
        self,
        num_heads,
        max_sequence_length,
        num_buckets=32,
        max_distance=128,
        cls_buckets=False,
        initializer="truncated_normal",
        **kwargs,
    ):
        super().__init__(max_sequence_length=max_sequence_length, **kwargs)
        if num_buckets < 4 or num_buckets % 2:
            raise ValueError(
                "`relative_buckets` must be an even integer >= 4. "
                f"Received: relative_buckets={num_buckets}"
            )
        if max_distance <= num_buckets // 4:
            raise ValueError(
                "`relative_max_distance` must be larger than "
                f"`relative_buckets / 4` ({num_buckets // 4}). "
                f"Received: relative_max_distance={max_distance}"
            )
        self.num_heads = num_heads
        self.num_buckets = num_buckets
        self.max_distance = max_distance
        self.cls_buckets = cls_buckets
        self.initializer = keras.initializers.get(initializer)
        positions = np.arange(self.max_sequence_length)
        self._bucket_matrix = relative_position_buckets(
            positions[None, :] - positions[:, None], num_buckets, max_distance
        )
        if cls_buckets:
            self._bucket_matrix[1:, 0] = num_buckets
            self._bucket_matrix[0, :] = num_buckets // 2

    def build(self, input_shape=None):
        self.relative_attention_bias = self.add_weight(
            name="relative_attention_bias",
            shape=(self.num_buckets + int(self.cls_buckets), self.num_heads),
            initializer=self.initializer,
        )
        self.built = True

    def compute_bias(self, sequence_length):
        buckets = ops.convert_to_tensor(self._bucket_matrix)
        buckets = buckets[:sequence_length, :sequence_length]
        # One gather: (n, n, heads) -> (1, 1, heads, n, n).
        values = ops.take(self.relative_attention_bias, buckets, axis=0)
        return ops.transpose(values, (2, 0, 1))[None, None]

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "num_buckets": self.num_buckets,
                "max_distance": self.max_distance,
                "cls_buckets": self.cls_buckets,
                "initializer": keras.initializers.serialize(self.initializer),
            }
        )
        return config
