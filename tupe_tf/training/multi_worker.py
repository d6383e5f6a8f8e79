"""A `strategy.run` training loop that reuses the model's own train step.

Keras 3 `Model.fit` fails under `MultiWorkerMirroredStrategy` (keras-team/
keras#20585: reducing the per-replica logs errors). This loop avoids `fit`'s
log handling but keeps everything else Keras: each step runs
`model.train_step` (same loss, metrics, gradient all-reduce and optimizer
update as `fit`) inside `strategy.run`, the logs are reduced with
`strategy.reduce`, and the usual callbacks and progress bar are driven
through `keras.callbacks.CallbackList`.

Each step also all-reduces whether any worker was asked to stop
(`tupe_tf.training.preemption.StopRequests`), so that on a preemption
notice to one worker every worker stops after the same step.

A worker that dies or stops answering ends the others: TensorFlow's
coordination service (which `MultiWorkerMirroredStrategy` starts) marks a
worker whose heartbeats stop for `HEARTBEAT_TIMEOUT_SECONDS` as failed and
aborts every collective, and a worker cut off from the service's leader
(worker 0) fails its own heartbeat after that time; a process that is
gone (its port refuses connections) fails the next collective at once.
`is_lost_worker` recognises the resulting errors, `WorkerLostError` is
what the survivors raise.
"""

import keras
import tensorflow as tf

from tupe_tf.training.callbacks import global_step
from tupe_tf.utils.backend import require_tensorflow
from tupe_tf.utils.errors import RunStopped

# EX_UNAVAILABLE of sysexits.h ("a service is unavailable"): distinct from
# a preemption's 75, since the steps since the last checkpoint are lost.
WORKER_LOST_EXIT_CODE = 69
# TensorFlow's coordination-service default: a survivor ends within about
# twice this (one heartbeat period late, then the timeout), plus the step.
HEARTBEAT_TIMEOUT_SECONDS = 10


class WorkerLostError(RunStopped):
    """Another worker of a multi-worker run died or stopped answering;
    this worker stopped. A rerun of every worker resumes from the last
    complete checkpoint."""

    exit_code = WORKER_LOST_EXIT_CODE


def is_lost_worker(error):
    """Whether `error` is a collective or heartbeat that failed because a
    peer is gone (TensorFlow raises `UnavailableError`; a collective
    timeout would be `DeadlineExceededError`)."""
    return isinstance(
        error, (tf.errors.UnavailableError, tf.errors.DeadlineExceededError)
    )


class DistributedTrainingLoop:
    """Trains a compiled Keras model with `strategy.run(model.train_step)`.

    Args:
        model: a compiled Keras model built under `strategy.scope()`.
        strategy: the `tf.distribute.Strategy` the model lives in.
        verbose: show a Keras progress bar (0 to silence; non-chief workers
            should pass 0).
        stop_requests: optional `preemption.StopRequests`; each step tells
            it whether any worker asked to stop (`agree`).

    Example:

    >>> strategy = tf.distribute.MultiWorkerMirroredStrategy()
    >>> with strategy.scope():
    ...     model = build_and_compile()
    >>> loop = DistributedTrainingLoop(model, strategy)
    >>> history = loop.fit(dataset_fn, epochs=10, steps_per_epoch=100)
    """

    def __init__(self, model, strategy, verbose=1, stop_requests=None):
        require_tensorflow("The tf.distribute training loop")
        self.model = model
        self.strategy = strategy
        self.verbose = verbose
        self.stop_requests = stop_requests
        self._train_function = None
        self._test_function = None

    def _reduce(self, per_replica_logs):
        return {
            name: self.strategy.reduce(
                tf.distribute.ReduceOp.MEAN, value, axis=None
            )
            for name, value in per_replica_logs.items()
        }

    def _make_train_function(self):
        if self._train_function is None:

            def replica_step(data, stop):
                return self.model.train_step(data), tf.identity(stop)

            @tf.function
            def train_function(iterator, stop):
                data = next(iterator)
                logs, stop = self.strategy.run(replica_step, args=(data, stop))
                # Summed with the logs' reductions, in the same step: every
                # worker gets the same answer for the same step.
                stop = self.strategy.reduce(
                    tf.distribute.ReduceOp.SUM, stop, axis=None
                )
                return self._reduce(logs), stop

            self._train_function = train_function
        return self._train_function

    def _make_test_function(self):
        if self._test_function is None:

            @tf.function
            def test_function(iterator):
                data = next(iterator)
                return self._reduce(
                    self.strategy.run(self.model.test_step, args=(data,))
                )

            self._test_function = test_function
        return self._test_function

    def _stop_flag(self):
        """1.0 when this worker was asked to stop (a tensor: one trace)."""
        stop = self.stop_requests is not None and (
            self.stop_requests.reason is not None
        )
        return tf.constant(float(stop))

    def agree_to_stop(self):
        """Tells `stop_requests` whether any worker was asked to stop since
        the last step (every worker calls this at the same point)."""

        @tf.function
        def any_worker(stop):
            stop = self.strategy.run(tf.identity, args=(stop,))
            return self.strategy.reduce(tf.distribute.ReduceOp.SUM, stop, None)

        self.stop_requests.agree(float(any_worker(self._stop_flag())) > 0)

    def evaluate(self, dataset, steps):
        """Mean metrics over `steps` batches of a distributed dataset."""
        test_function = self._make_test_function()
        self.model.reset_metrics()
        iterator = iter(dataset)
        logs = {}
        for _ in range(steps):
            logs = test_function(iterator)
        return {name: float(value) for name, value in logs.items()}

    def fit(
        self,
        dataset,
        epochs,
        steps_per_epoch,
        initial_epoch=0,
        callbacks=(),
        validation_data=None,
        validation_steps=None,
        validation_freq=1,
    ):
        """Same contract as `keras.Model.fit` for an infinite dataset.

        Args:
            dataset: a distributed dataset (`strategy.
                distribute_datasets_from_function`) that does not run out.
            epochs, steps_per_epoch, initial_epoch: as in `fit`.
            callbacks: Keras callbacks.
            validation_data: a distributed evaluation dataset, or `None`.
            validation_steps: batches per evaluation.
            validation_freq: evaluate every this many epochs.

        Returns:
            A `keras.callbacks.History`.
        """
        history = keras.callbacks.History()
        callback_list = keras.callbacks.CallbackList(
            list(callbacks) + [history],
            add_progbar=bool(self.verbose),
            model=self.model,
            verbose=self.verbose,
            epochs=epochs,
            steps=steps_per_epoch,
        )
        train_function = self._make_train_function()
        iterator = iter(dataset)
        self.model.stop_training = False
        callback_list.on_train_begin()
        logs = {}
        for epoch in range(initial_epoch, epochs):
            self.model.reset_metrics()
            callback_list.on_epoch_begin(epoch)
            for step in range(steps_per_epoch):
                callback_list.on_train_batch_begin(step)
                logs, stop = train_function(iterator, self._stop_flag())
                logs = {k: float(v) for k, v in logs.items()}
                if self.stop_requests is not None:
                    self.stop_requests.agree(float(stop) > 0)
                callback_list.on_train_batch_end(step, logs)
                if self.model.stop_training:
                    break
            epoch_logs = dict(logs)
            if (
                validation_data is not None
                and (epoch + 1) % validation_freq == 0
            ):
                val_logs = self.evaluate(validation_data, validation_steps)
                epoch_logs.update({"val_" + k: v for k, v in val_logs.items()})
            callback_list.on_epoch_end(epoch, epoch_logs)
            if self.model.stop_training:
                break
        callback_list.on_train_end(logs)
        return history

    @property
    def step(self):
        return global_step(self.model)
