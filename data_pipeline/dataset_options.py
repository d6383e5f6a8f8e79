"""`tf.data` options shared by the package's input pipelines."""


def without_autotuning(dataset):
    """Returns `dataset` with tf.data's autotuning model switched off.

    Two costs of the autotuning model measured on a 2-core CPU (TF 2.21):
    deleting a finished shard-building iterator stalled for 0.4-0.6 s in 8 of
    25 trials, and a fine-tuning `fit` step ran at a fixed 205 ms instead of
    about 140 ms in 6 of 10 fresh processes (0 of 7 without it;
    `benchmarks/finetune_input_autotune.py`). Without the model, parallel
    maps use one call per core and `prefetch(AUTOTUNE)` still grows its
    buffer on demand.

    Args:
      dataset: a `tf.data.Dataset`.

    Returns:
      The dataset with the options applied.

    Example:

    >>> import tensorflow as tf
    >>> ds = without_autotuning(tf.data.Dataset.range(3))
    >>> ds.options().autotune.enabled
    False
    """
    import tensorflow as tf

    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.with_options(options)
