"""Batched tf.train.Example serialization against the protobuf library."""

import numpy as np
import pytest
import tensorflow as tf

from data_pipeline import example_encoding


def _python_example(features, row):
    """Reference: the protobuf library, deterministic serialization."""
    example = tf.train.Example()
    for name, (kind, values, lengths) in features.items():
        n = values.shape[1] if lengths is None else lengths[row]
        target = example.features.feature[name]
        if kind == "int64":
            target.int64_list.value.extend(values[row, :n].tolist())
        else:
            target.float_list.value.extend(values[row, :n].tolist())
    return example.SerializeToString(deterministic=True)


def test_bytes_match_the_protobuf_library():
    rng = np.random.default_rng(0)
    batch = 40
    lengths = rng.integers(1, 33, batch).astype(np.int32)
    features = {
        # Varints of every width, negatives included.
        "input_word_ids": (
            "int64",
            rng.integers(-(2**40), 2**62, (batch, 32)),
            lengths,
        ),
        "small": ("int64", rng.integers(0, 300, (batch, 5)), None),
        "weights": (
            "float",
            rng.normal(size=(batch, 7)).astype(np.float32),
            None,
        ),
        "a_first_key": ("int64", np.zeros([batch, 1], np.int64), None),
    }
    records = example_encoding.serialize_examples(
        {
            name: (
                kind,
                tf.constant(values),
                None if n is None else tf.constant(n),
            )
            for name, (kind, values, n) in features.items()
        }
    ).numpy()
    assert records.shape == (batch,)
    for row in range(batch):
        assert records[row] == _python_example(features, row), row


def test_gathered_entry_table_equals_direct_encoding():
    width = 6
    table = example_encoding.feature_entries(
        "input_mask",
        "int64",
        tf.constant(np.tril(np.ones([width + 1, width], np.int64), -1)),
    )
    lengths = tf.constant([0, 3, 6, 1])
    mask = tf.cast(
        tf.range(width)[tf.newaxis, :] < lengths[:, tf.newaxis], tf.int64
    )
    direct = example_encoding.serialize_examples(
        {"input_mask": ("int64", mask, None)}
    )
    gathered = example_encoding.examples_from_entries(
        {"input_mask": tf.gather(table, lengths)}
    )
    np.testing.assert_array_equal(direct.numpy(), gathered.numpy())
    parsed = tf.io.parse_example(
        gathered, {"input_mask": tf.io.FixedLenFeature([width], tf.int64)}
    )
    np.testing.assert_array_equal(parsed["input_mask"].numpy(), mask.numpy())


def test_works_inside_tf_function_with_unknown_batch():
    @tf.function(
        input_signature=[
            tf.TensorSpec([None, 3], tf.int32),
            tf.TensorSpec([None], tf.int32),
        ]
    )
    def serialize(ids, lengths):
        return example_encoding.serialize_examples(
            {"ids": ("int64", ids, lengths)}
        )

    records = serialize(
        tf.constant([[5, 6, 7], [8, 0, 0]]), tf.constant([3, 1])
    ).numpy()
    parsed = [
        list(
            tf.train.Example.FromString(r)
            .features.feature["ids"]
            .int64_list.value
        )
        for r in records
    ]
    assert parsed == [[5, 6, 7], [8]]


def test_bad_kind_and_no_features():
    with pytest.raises(ValueError, match="'ids'.*kind"):
        example_encoding.serialize_examples(
            {"ids": ("bytes", tf.zeros([1, 1]), None)}
        )
    with pytest.raises(ValueError, match="at least one feature"):
        example_encoding.serialize_examples({})
