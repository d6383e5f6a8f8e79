"""`tf.data` options shared by the package's input pipelines."""


def without_autotuning(dataset):
    """Returns `dataset` with tf.data's autotuning model switched off.

    On few cores the autotuning model can stall the deletion of a finished
    iterator and pin a fine-tuning step at a slower rate in some processes
    (`benchmarks/finetune_input_autotune.py` shows it). Without the model,
    parallel maps use one call per core and `prefetch(AUTOTUNE)` still grows
    its buffer on demand.

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
