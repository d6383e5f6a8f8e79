"""Preemption: a notice saves the step the run is at, then the run exits.

A spot or preemptible VM gets SIGTERM some seconds before it goes; a GCE
VM with GPUs or TPUs also announces, in its metadata, a host maintenance
that will terminate it. While the training steps run, `StopRequests`
turns either into a request to stop instead of ending the process: the
step under way finishes, every worker agrees on the step
(`DistributedTrainingLoop` all-reduces the request with the step's logs;
`fit` runs in one process), the checkpoint of that step is saved and the
run ends with `PreemptedError` (exit code 75 in the scripts). A rerun of
the same command resumes from that checkpoint and loses no step.

What SIGTERM does, and when, is the one policy of
`tupe_tf.utils.interrupts`: a second SIGTERM ends the process at once,
even inside the save, which writes `ckpt-<N>_temp` and names it in the
`checkpoint` index only when complete, so the previous checkpoint stays
the latest, and the next run removes the temporary
(`pretrain_model.remove_temporary_checkpoints`). The metadata server is
polled only where such a notice can come (`watches_gce`): elsewhere the
poll would be a network request of every run for nothing.

`tf.distribute.experimental.PreemptionCheckpointHandler` (TF 2.21) cannot
serve the multi-worker loop: on a GCE CPU VM it does nothing; its SIGTERM
handler stays, so a second SIGTERM cannot end a hung save; it agrees on a
count of its own calls and saves one step after the notice, never when the
notice comes in the last step; and at construction it restores from the
`CheckpointManager`'s directory, which on a worker other than the chief is
that worker's scratch copy, not the chief's checkpoints the run resumed
from.

Example:
>>> requests = StopRequests(watch_gce=watches_gce(config, strategy))
>>> with requests:  # doctest: +SKIP
...     model.fit(data, callbacks=[StopOnRequest(requests, saver)])
"""

import contextlib
import os
import threading
import urllib.request

import keras
import tensorflow as tf
from absl import logging

from tupe_tf.training.callbacks import global_step
from tupe_tf.utils import interrupts
from tupe_tf.utils.errors import RunStopped

# EX_TEMPFAIL of sysexits.h, "a temporary failure; the user is invited to
# retry": a code that retry policies can name (Kubernetes' podFailurePolicy
# onExitCodes, systemd's RestartForceExitStatus, a requeue script), unlike
# 143, which a SIGTERM that killed the run before it saved gives too.
PREEMPTED_EXIT_CODE = 75
# How often the GCE maintenance-event watcher asks the metadata server.
GCE_POLL_SECONDS = 5.0
GCE_MAINTENANCE_EVENT = (
    "http://metadata.google.internal/computeMetadata/v1/instance/"
    "maintenance-event"
)


class PreemptedError(RunStopped):
    """The run stopped on a preemption notice after saving the checkpoint
    of the step it was at; a rerun resumes from it."""

    exit_code = PREEMPTED_EXIT_CODE


def watches_gce(config, strategy):
    """Whether the run polls the GCE metadata server for a host
    maintenance event: as `--watch_gce_maintenance` says; unset, where the
    strategy's cluster resolver is a Cloud TPU's or GCE's, the places
    where such a notice is known to come.

    Args:
        config: the run's `PretrainConfig`.
        strategy: its `tf.distribute.Strategy`.
    """
    if config.watch_gce_maintenance is not None:
        return config.watch_gce_maintenance
    resolvers = tf.distribute.cluster_resolver
    return isinstance(
        getattr(strategy, "cluster_resolver", None),
        (resolvers.TPUClusterResolver, resolvers.GCEClusterResolver),
    )


def _gce_announces_termination():
    """Whether the GCE metadata server announces a host maintenance that
    terminates this VM; raises `OSError` off GCE."""
    request = urllib.request.Request(
        GCE_MAINTENANCE_EVENT, headers={"Metadata-Flavor": "Google"}
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        return response.read() == b"TERMINATE_ON_HOST_MAINTENANCE"


class StopRequests:
    """While entered, SIGTERM (`interrupts.sigterm_requests_stop`) and,
    when watched, a GCE maintenance event request a stop instead of ending
    the run; `reason` says which, once one arrived.

    Under `MultiWorkerMirroredStrategy` the training loop reports whether
    any worker asked (`agree`), so that every worker stops after the same
    step; elsewhere this process's request decides.

    Args:
        watch_gce: also poll the GCE metadata server (in a daemon thread,
            which gives up at once off GCE); `watches_gce` decides.
    """

    def __init__(self, watch_gce=False):
        self.reason = None
        self.agreed = None
        self._watch_gce = watch_gce
        self._signals = contextlib.ExitStack()
        self._done = threading.Event()

    def __enter__(self):
        self._signals.enter_context(
            interrupts.sigterm_requests_stop(self.request)
        )
        if self._watch_gce:
            threading.Thread(target=self._poll_gce, daemon=True).start()
        return self

    def __exit__(self, *exc_info):
        self._done.set()
        self._signals.close()

    def _poll_gce(self):
        on_gce = False
        while not self._done.wait(GCE_POLL_SECONDS):
            try:
                terminating = _gce_announces_termination()
            except OSError as error:
                if not on_gce:
                    return  # Not on GCE.
                logging.warning("GCE maintenance-event poll failed: %s", error)
                continue
            on_gce = True
            if terminating:
                self.request("a GCE host maintenance event")
                return

    def request(self, reason):
        """Asks the run to stop after the step under way (first reason
        kept)."""
        if self.reason is None:
            self.reason = reason

    def agree(self, any_worker_asked):
        """The training loop's all-reduced answer for the step just run."""
        self.agreed = bool(any_worker_asked)

    @property
    def should_stop(self):
        if self.agreed is not None:
            return self.agreed
        return self.reason is not None


def preempted_error(requests, path, step):
    """The `PreemptedError` of a run saved at `step` into `path`."""
    reason = requests.reason or "another worker was asked to stop"
    return PreemptedError(
        f"Preempted ({reason}) at step {step}: saved checkpoint {path} and "
        "stopped. Rerun the same command to resume from it (no step is "
        "lost)."
    )


class StopOnRequest(keras.callbacks.Callback):
    """Ends training after the batch during which a stop was requested:
    saves the checkpoint of that step and raises `PreemptedError`.

    Raising (rather than setting `stop_training`) leaves at once: `fit`
    would otherwise run the epoch's evaluation inside the notice's grace
    period.

    Args:
        requests: the `StopRequests` that is entered.
        saver: the run's `CheckpointSaver`.
        checkpoint_dir: the directory a rerun resumes from, named in the
            error (on every worker the chief's, not this worker's scratch
            directory the saver writes).
    """

    def __init__(self, requests, saver, checkpoint_dir):
        super().__init__()
        self.requests = requests
        self.saver = saver
        self.checkpoint_dir = checkpoint_dir

    def on_train_batch_end(self, batch, logs=None):
        if self.requests.should_stop:
            self.stop()

    def stop(self):
        step = global_step(self.model)
        logging.warning(
            "Stop requested (%s): saving step %d.",
            self.requests.reason or "by another worker",
            step,
        )
        path = self.saver.save()
        path = os.path.join(self.checkpoint_dir, os.path.basename(path))
        raise preempted_error(self.requests, path, step)
