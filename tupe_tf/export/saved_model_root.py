"""The root object of the SavedModels tupe-tf exports."""

import tensorflow as tf


class SavedModelRoot(tf.Module):
    """A `tf.Module` whose variable lists are attributes the exporter sets.

    TF Hub's reusable SavedModel API (which `hub.KerasLayer` reads) wants
    `variables`, `trainable_variables` and `regularization_losses` saved as
    attributes of the loaded object. `tf.Module` computes the first two
    from what its attributes reach, as read-only properties that are not
    saved; here they are plain attributes instead (empty until set), and
    everything else is `tf.Module`'s: attributes assigned to it (variables,
    `tf.function`s, other trackables) are saved with it.

    Example:
    ```python
    root = SavedModelRoot()
    root.variables = [v.value for v in model.variables]
    root.trainable_variables = [v.value for v in model.trainable_variables]
    root.regularization_losses = []
    root.serve = tf.function(model.call, input_signature=[spec])
    tf.saved_model.save(root, export_dir)
    ```
    """

    # Class attributes hide `tf.Module`'s properties of the same names, so
    # that an instance can hold the lists themselves.
    variables = ()
    trainable_variables = ()
