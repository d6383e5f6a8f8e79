import tensorflow as tf

from data_pipeline import dataset_options


def test_without_autotuning_keeps_elements_and_other_options():
    dataset = tf.data.Dataset.range(5).map(
        lambda x: x * 2, num_parallel_calls=tf.data.AUTOTUNE
    )
    tuned = dataset_options.without_autotuning(
        dataset.prefetch(tf.data.AUTOTUNE)
    )
    assert tuned.options().autotune.enabled is False
    # Only autotuning changes: the dataset's other options stay unset.
    assert tuned.options().deterministic is None
    assert list(tuned.as_numpy_iterator()) == [0, 2, 4, 6, 8]
