"""Keras callbacks for pre-training: TensorBoard scalars, NaN guard, checkpoints.

All three key their work on the optimizer's iteration count (the global
step), not on per-`fit` batch counters, so logs and checkpoints line up
across a crash and resume. They run unchanged under `model.fit` and under
the multi-worker custom loop (`tupe_tf.training.multi_worker`), which
drives them through a `keras.callbacks.CallbackList`.
"""

import math
import time

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from tupe_tf.training.optimization import current_learning_rate
from tupe_tf.utils.errors import UserError


def global_step(model):
    """The optimizer's iteration count as a Python int."""
    return int(
        np.asarray(keras.ops.convert_to_numpy(model.optimizer.iterations.value))
    )


class NonFiniteLossError(UserError, RuntimeError):
    """Raised when the training loss becomes NaN or infinite: training on
    garbage is refused, and the last good checkpoint is kept (exit code 3
    in the scripts)."""

    exit_code = 3


class TrainingLogger(keras.callbacks.Callback):
    """Writes loss, MLM accuracy, learning rate and steps/s to TensorBoard.

    Keras' `TensorBoard` callback counts batches per `fit` call, so after a
    resume its x-axis restarts at 0; this callback uses the global step.
    Training scalars go to `<log_dir>/train`, evaluation ones (the `val_`
    entries of the epoch logs) to `<log_dir>/eval`.

    Args:
        log_dir: TensorBoard directory.
        log_every: write training scalars every this many steps.
        global_batch_size: used for the sequences/s scalar.

    Example:

    >>> model.fit(ds, callbacks=[TrainingLogger("/tmp/logs", 50, 256)])
    """

    def __init__(self, log_dir, log_every=100, global_batch_size=None):
        super().__init__()
        self.log_dir = log_dir
        self.log_every = max(int(log_every), 1)
        self.global_batch_size = global_batch_size
        self._train_writer = None
        self._eval_writer = None
        self._last_step = None
        self._last_time = None
        self._last_logged = None

    def _writers(self):
        if self._train_writer is None:
            self._train_writer = tf.summary.create_file_writer(
                self.log_dir + "/train"
            )
            self._eval_writer = tf.summary.create_file_writer(
                self.log_dir + "/eval"
            )
        return self._train_writer, self._eval_writer

    def on_train_begin(self, logs=None):
        self._last_step = global_step(self.model)
        self._last_logged = self._last_step
        self._last_time = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        step = global_step(self.model)
        if step - self._last_logged < self.log_every:
            return
        now = time.perf_counter()
        steps_per_second = (step - self._last_step) / max(
            now - self._last_time, 1e-9
        )
        train_writer, _ = self._writers()
        with train_writer.as_default(step=step):
            for name, value in (logs or {}).items():
                tf.summary.scalar(name, float(value))
            tf.summary.scalar(
                "learning_rate", current_learning_rate(self.model.optimizer)
            )
            tf.summary.scalar("steps_per_second", steps_per_second)
            if self.global_batch_size:
                tf.summary.scalar(
                    "sequences_per_second",
                    steps_per_second * self.global_batch_size,
                )
        train_writer.flush()
        self._last_logged = step
        self._last_step = step
        self._last_time = now

    def on_epoch_end(self, epoch, logs=None):
        eval_logs = {
            k[4:]: v for k, v in (logs or {}).items() if k.startswith("val_")
        }
        if eval_logs:
            self.write_eval(eval_logs)
        # Evaluation time is not training time.
        self._last_time = time.perf_counter()
        self._last_step = global_step(self.model)

    def write_eval(self, eval_logs):
        _, eval_writer = self._writers()
        with eval_writer.as_default(step=global_step(self.model)):
            for name, value in eval_logs.items():
                tf.summary.scalar(name, float(value))
        eval_writer.flush()

    def on_train_end(self, logs=None):
        for writer in (self._train_writer, self._eval_writer):
            if writer is not None:
                writer.flush()


class NonFiniteLossGuard(keras.callbacks.Callback):
    """Stops training with `NonFiniteLossError` at the first NaN/Inf loss.

    Unlike `keras.callbacks.TerminateOnNaN`, which lets the epoch end (and
    so lets an end-of-epoch checkpoint save the broken weights), this raises
    from the batch, so nothing after the bad step is saved.

    Args:
        checkpoint_manager: optional `tf.train.CheckpointManager`, named in
            the error message as the last good checkpoint.
    """

    def __init__(self, checkpoint_manager=None):
        super().__init__()
        self.checkpoint_manager = checkpoint_manager

    def on_train_batch_end(self, batch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is None or math.isfinite(float(loss)):
            return
        step = global_step(self.model)
        last = (
            self.checkpoint_manager.latest_checkpoint
            if self.checkpoint_manager
            else None
        )
        raise NonFiniteLossError(
            f"Training loss became {float(loss)} at step {step}; stopped. "
            + (
                f"The last good checkpoint is kept: {last}. "
                if last
                else "No checkpoint had been written yet. "
            )
            + "Lower --learning_rate, raise --warmup_steps, or use "
            "--mixed_precision=float32, then rerun the same command to resume."
        )


class CheckpointSaver(keras.callbacks.Callback):
    """Saves a `tf.train.CheckpointManager` checkpoint at each epoch end.

    The pre-training loop makes one Keras epoch `save_every` steps long, so
    this checkpoints every `save_every` steps, numbered by global step.
    `CheckpointManager` writes the checkpoint files first and then
    atomically replaces the `checkpoint` index, so a `kill -9` mid-save
    leaves the previous checkpoint as the latest.

    Args:
        checkpoint_manager: a `tf.train.CheckpointManager` whose checkpoint
            tracks the model and its optimizer.
    """

    def __init__(self, checkpoint_manager):
        super().__init__()
        self.checkpoint_manager = checkpoint_manager

    def on_epoch_end(self, epoch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is not None and not math.isfinite(float(loss)):
            logging.error("Not checkpointing: loss is %s.", loss)
            return
        self.save()

    def save(self):
        step = global_step(self.model)
        if self.checkpoint_manager.latest_checkpoint and (
            self.checkpoint_manager.latest_checkpoint.endswith(f"-{step}")
        ):
            return self.checkpoint_manager.latest_checkpoint
        path = self.checkpoint_manager.save(checkpoint_number=step)
        logging.debug("Saved checkpoint %s", path)
        return path
