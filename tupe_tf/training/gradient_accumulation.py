"""A train step that sums the gradients of micro-batches before one update.

Keras 3's `gradient_accumulation_steps` optimizer argument counts each
micro-batch as an optimizer iteration for the learning-rate schedule and
fails under `MirroredStrategy` (its accumulate-or-apply `cond` holds the
gradient all-reduce: "`merge_call` called while defining a new graph").
Here the update's batch is split inside the train step instead, so `fit`,
the multi-worker loop, the optimizer's iterations, the schedule, the logs,
the checkpoints and the data stream all see one step per update, and the
all-reduce and loss scaling happen once per update, as without it.
"""

import keras
import tensorflow as tf


class GradientAccumulation:
    """A compiled Keras model's train step over `steps` micro-batches.

    Each replica's batch is cut into `steps` consecutive micro-batches;
    each runs forward and backward on its own (activations, hence memory,
    follow the micro-batch), and the optimizer applies the mean of their
    gradients once. With equal micro-batches and a loss that is a mean
    over the batch, that is the gradient of the whole batch (to
    round-off). Loss and metrics accumulate over the micro-batches as over
    batches. TensorFlow backend; the loop over micro-batches is unrolled.

    Args:
        model: a compiled Keras model.
        steps: micro-batches per update (>= 1; it must divide each
            replica's batch).

    Example:

    >>> model.compile(optimizer="adam", loss="mse")
    >>> GradientAccumulation(model, steps=4).install()
    >>> model.fit(dataset_of_batches_of_32)  # 4 micro-batches of 8
    """

    def __init__(self, model, steps):
        self.model = model
        self.steps = int(steps)

    def install(self):
        """Makes `model.fit` (and `model.train_step`'s callers) use this
        step; returns the model."""
        self.model.train_step = self.train_step
        return self.model

    def _micro_batches(self, data):
        def split(tensor):
            if tensor is None:
                return [None] * self.steps
            return tf.split(tensor, self.steps, axis=0)

        flat = [split(t) for t in keras.tree.flatten(data)]
        return [
            keras.tree.pack_sequence_as(data, [parts[i] for parts in flat])
            for i in range(self.steps)
        ]

    def _micro_step(self, data):
        """Forward, loss and scaled gradients of one micro-batch."""
        model = self.model
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        with tf.GradientTape() as tape:
            y_pred = model(x, training=True)
            loss = model.compute_loss(
                x=x,
                y=y,
                y_pred=y_pred,
                sample_weight=sample_weight,
                training=True,
            )
            loss_metric(model).update_state(
                unscaled_loss(loss),
                sample_weight=tf.shape(keras.tree.flatten(x)[0])[0],
            )
            loss = model.optimizer.scale_loss(loss)
        gradients = tape.gradient(loss, model.trainable_weights)
        return gradients, model.compute_metrics(x, y, y_pred, sample_weight)

    def train_step(self, data):
        total, metrics = None, None
        for micro_batch in self._micro_batches(data):
            gradients, metrics = self._micro_step(micro_batch)
            total = (
                gradients
                if total is None
                else list(map(_add, total, gradients))
            )
        mean = [_scale(g, 1.0 / self.steps) for g in total]
        weights = self.model.trainable_weights
        self.model.optimizer.apply_gradients(zip(mean, weights))
        return metrics


def loss_metric(model):
    """The `Mean` metric behind `fit`'s "loss" log of a compiled model.

    `Model.metrics` lists it first, named "loss" (the compiled losses'
    own trackers, if any, are named after their outputs).
    """
    for metric in model.metrics:
        if metric.name == "loss":
            return metric
    raise ValueError(
        "The model has no 'loss' metric: compile it before installing "
        "GradientAccumulation."
    )


def unscaled_loss(loss):
    """`loss` as `fit`'s "loss" log shows it.

    Under a `tf.distribute` strategy `compute_loss` divides each replica's
    loss by the number of replicas (their gradients then sum to the mean);
    the log multiplies it back, as Keras' own train step does.
    """
    replicas = tf.distribute.get_strategy().num_replicas_in_sync
    if replicas > 1:
        loss = loss * tf.cast(replicas, loss.dtype)
    return loss


def _add(total, gradient):
    """The sum of two gradients; two `tf.IndexedSlices` (of a gather) stay
    slices, concatenated, so that the optimizer's global norm sees the
    slices it would see for the whole batch."""
    if total is None:
        return None
    if isinstance(total, tf.IndexedSlices) and isinstance(
        gradient, tf.IndexedSlices
    ):
        return tf.IndexedSlices(
            tf.concat([total.values, gradient.values], 0),
            tf.concat([total.indices, gradient.indices], 0),
            total.dense_shape,
        )
    return tf.convert_to_tensor(total) + tf.convert_to_tensor(gradient)


def _scale(gradient, factor):
    if isinstance(gradient, tf.IndexedSlices):
        return tf.IndexedSlices(
            gradient.values * factor, gradient.indices, gradient.dense_shape
        )
    return None if gradient is None else gradient * factor
