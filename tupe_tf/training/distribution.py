"""`tf.distribute` strategy factory and the checks that go with it."""

import dataclasses
import json
import os

import tensorflow as tf
from absl import logging

from tupe_tf.training.run_lock import LOCK_NAME
from tupe_tf.utils import fileio
from tupe_tf.utils.backend import require_tensorflow
from tupe_tf.utils.errors import UserError


def configure_logical_cpus(num_devices):
    """Splits the host CPU into `num_devices` logical devices.

    Must run before TensorFlow initialises its devices (before any op runs);
    afterwards TF refuses, and this raises a `RuntimeError` saying so.

    Args:
        num_devices: number of logical CPU devices wanted.

    Example:

    >>> configure_logical_cpus(2)  # first thing in the process
    >>> tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    """
    require_tensorflow("Splitting the CPU for tf.distribute")
    cpus = tf.config.list_physical_devices("CPU")
    current = tf.config.get_logical_device_configuration(cpus[0])
    if current and len(current) == num_devices:
        return
    try:
        tf.config.set_logical_device_configuration(
            cpus[0],
            [
                tf.config.LogicalDeviceConfiguration()
                for _ in range(num_devices)
            ],
        )
    except RuntimeError as error:
        raise RuntimeError(
            f"Cannot split the CPU into {num_devices} logical devices: "
            "TensorFlow is already initialised in this process. Pass "
            "--num_cpu_devices before anything runs TF ops (the scripts do "
            f"this first). Original error: {error}"
        ) from error


def create_strategy(name="default", tpu=None, num_cpu_devices=None):
    """Builds a `tf.distribute.Strategy` by name.

    Args:
        name: `default` (no distribution), `one_device` (first GPU, else
            CPU), `mirrored` (all local GPUs; on a CPU-only host, the CPU
            split into `num_cpu_devices` logical devices, default 2),
            `multi_worker_mirrored` (cluster from `TF_CONFIG`) or `tpu`.
        tpu: for `tpu`, the TPU name or `grpc://host:port`; `"local"` (or
            `None`) on a TPU VM.
        num_cpu_devices: logical CPU devices for `mirrored` without GPUs.

    Returns:
        A `tf.distribute.Strategy`.

    Raises:
        UserError: any strategy but `default` on a backend other than
            TensorFlow.

    Example:

    >>> strategy = create_strategy("mirrored", num_cpu_devices=2)
    >>> strategy.num_replicas_in_sync
    2
    """
    if name == "default":  # no distribution: a no-op scope on any backend
        return tf.distribute.get_strategy()
    require_tensorflow(f"--strategy={name}")
    if name == "one_device":
        gpus = tf.config.list_logical_devices("GPU")
        device = gpus[0].name if gpus else "/cpu:0"
        return tf.distribute.OneDeviceStrategy(device)
    if name == "mirrored":
        if tf.config.list_physical_devices("GPU"):
            return tf.distribute.MirroredStrategy()
        num_cpu_devices = num_cpu_devices or 2
        configure_logical_cpus(num_cpu_devices)
        devices = [d.name for d in tf.config.list_logical_devices("CPU")]
        if len(devices) < num_cpu_devices:
            raise RuntimeError(
                f"Asked for {num_cpu_devices} CPU replicas but TensorFlow has "
                f"{len(devices)} logical CPU devices."
            )
        return tf.distribute.MirroredStrategy(devices[:num_cpu_devices])
    if name == "multi_worker_mirrored":
        if "TF_CONFIG" in os.environ:
            try:
                json.loads(os.environ["TF_CONFIG"])
            except ValueError as error:
                raise UserError(
                    f"TF_CONFIG is not valid JSON: {os.environ['TF_CONFIG']!r}"
                ) from error
        else:
            logging.warning(
                "--strategy=multi_worker_mirrored without TF_CONFIG: running "
                "as a single worker."
            )
        return tf.distribute.MultiWorkerMirroredStrategy()
    if name == "tpu":
        return _create_tpu_strategy(tpu)
    raise UserError(
        f"--strategy={name!r} is not one of default, one_device, mirrored, "
        "multi_worker_mirrored, tpu."
    )


def describe_devices(strategy="default"):
    """The line a training script starts with: the devices it trains on.

    TensorFlow falls back to the CPU without an error when it finds no GPU
    (no driver, or a CUDA library missing); this line says so before the
    first step. The GPUs are TensorFlow's physical ones, named as their
    driver names them; with `strategy="tpu"` the TPU cores it sees.
    Listing physical devices leaves them unconfigured, so it may run
    before `create_strategy`.

    Args:
        strategy: the `--strategy` name (`create_strategy`'s `name`):
            `mirrored` and `multi_worker_mirrored` train on every local
            GPU, the others on the first.

    Returns:
        One line, e.g. "training on 1 GPU: NVIDIA H200" or "training on
        the CPU: TensorFlow sees no GPU".

    Example:

    >>> describe_devices()  # on a machine without a GPU
    'training on the CPU: TensorFlow sees no GPU'
    """
    if strategy == "tpu":
        cores = tf.config.list_physical_devices("TPU")
        if not cores:
            # A TPU reached by name or address is listed only once the
            # strategy has connected to it.
            return "training on a TPU: --strategy=tpu connects to it"
        return f"training on {_count(len(cores), 'TPU core')}"
    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        line = "training on the CPU: TensorFlow sees no GPU"
        if tf.test.is_built_with_cuda() and _hides_warnings():
            # Its reasons (a missing CUDA library) are C++ warnings.
            line += " (TF_CPP_MIN_LOG_LEVEL=0 shows why)"
        return line
    names = [_gpu_name(gpu) for gpu in gpus]
    if strategy in ("mirrored", "multi_worker_mirrored"):
        return f"training on {_count(len(gpus), 'GPU')}: {', '.join(names)}"
    line = f"training on 1 GPU: {names[0]}"
    if len(gpus) > 1:
        line += f" (of {len(gpus)}; --strategy=mirrored trains on all)"
    return line


def _count(number, noun):
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _gpu_name(gpu):
    details = tf.config.experimental.get_device_details(gpu)
    return details.get("device_name", gpu.name)


def _hides_warnings():
    """Whether `TF_CPP_MIN_LOG_LEVEL` hides TensorFlow's C++ warnings."""
    try:
        return int(os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0")) >= 2
    except ValueError:
        return False


def _create_tpu_strategy(tpu):
    tpu = tpu or "local"
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
        if tpu != "local":
            tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except (ValueError, RuntimeError, tf.errors.OpError) as error:
        raise RuntimeError(
            f"--strategy=tpu: could not reach TPU {tpu!r}: {error}. On a TPU "
            "VM use --tpu=local; otherwise the TPU name or grpc:// address."
        ) from error
    return tf.distribute.TPUStrategy(resolver)


def is_chief(strategy):
    """True on the worker that writes shared outputs (checkpoints, preset):
    the strategy's `should_checkpoint` (the chief, or worker 0 of a
    cluster without one; every single-worker strategy)."""
    return strategy.extended.should_checkpoint


def worker_dir(path, strategy):
    """`path` on the chief, a per-worker scratch dir elsewhere.

    Every worker must take part in saving (saving may run collectives), but
    only the chief's files are kept. A URL (`gs://b/run/checkpoints`) stays
    one (`gs://b/run/.worker1_checkpoints`).
    """
    if is_chief(strategy):
        return path
    task_id = strategy.cluster_resolver.task_id
    path = fileio.absolute_path(path)
    return os.path.join(
        os.path.dirname(path), f".worker{task_id}_" + os.path.basename(path)
    )


@dataclasses.dataclass(frozen=True)
class WorkerPaths:
    """Where one worker of a pre-training run writes (`worker_paths`).

    Attributes:
        checkpoint_dir: its checkpoints.
        preset_dir: its preset.
        lock_name: its lock file in `--model_dir` (`run_lock.hold`).
    """

    checkpoint_dir: str
    preset_dir: str
    lock_name: str


def worker_paths(config, strategy):
    """This worker's `WorkerPaths`: the run's own on the chief; on worker
    `i`, scratch siblings named `.worker<i>_<name>` (`worker_dir`), which
    it removes once the run is complete, and a lock of its own.

    Args:
        config: a `PretrainConfig`.
        strategy: the run's `tf.distribute.Strategy`.

    Example:
    >>> worker_paths(config, strategy).checkpoint_dir  # doctest: +SKIP
    '/home/me/runs/tiny/.worker1_checkpoints'
    """
    lock = worker_dir(os.path.join(config.model_dir, LOCK_NAME), strategy)
    return WorkerPaths(
        checkpoint_dir=worker_dir(config.checkpoint_dir, strategy),
        preset_dir=worker_dir(config.preset_dir, strategy),
        lock_name=os.path.basename(lock),
    )


def per_replica_batch_size(global_batch_size, strategy):
    """Splits the global batch, refusing one that does not divide evenly."""
    replicas = strategy.num_replicas_in_sync
    if global_batch_size <= 0 or global_batch_size % replicas:
        raise UserError(
            f"--global_batch_size={global_batch_size} is not divisible by the "
            f"number of replicas ({replicas}) of --strategy. Use a multiple of "
            f"{replicas}."
        )
    return global_batch_size // replicas


def micro_batch_size(global_batch_size, strategy, accumulation_steps):
    """Each replica's micro-batch under gradient accumulation, refusing a
    batch per replica that `accumulation_steps` does not divide."""
    per_replica = per_replica_batch_size(global_batch_size, strategy)
    if per_replica % accumulation_steps:
        multiple = accumulation_steps * strategy.num_replicas_in_sync
        raise UserError(
            f"--gradient_accumulation_steps={accumulation_steps} does not "
            f"divide the batch of each replica ({per_replica} of "
            f"--global_batch_size={global_batch_size}). Use a divisor of "
            f"{per_replica}, or a --global_batch_size that is a multiple of "
            f"{multiple}."
        )
    return per_replica // accumulation_steps


def jit_compile(runtime):
    """Whether the train step is XLA-compiled: `runtime.jit_compile` when
    set; unset, yes except where the strategy in scope replicates the step
    over several local CPU devices (`MirroredStrategy` on logical CPUs).

    XLA shortens the main job's step on CPU (docs/benchmarks.md) and is
    what accelerators want; on logical CPU devices TensorFlow cannot
    compile a replicated step (a replica reads a variable placed on another
    device). The multi-worker loop runs its own `tf.function` and so
    ignores it. Call it in the strategy's scope, where the model is
    compiled.

    Args:
        runtime: a `RuntimeConfig`.
    """
    if runtime.jit_compile is not None:
        return runtime.jit_compile
    if not tf.distribute.has_strategy():
        return True
    devices = tf.distribute.get_strategy().extended.worker_devices
    on_cpus = all(":CPU:" in device.upper() for device in devices)
    return not (len(devices) > 1 and on_cpus)
