"""The line the training scripts start with: the devices they train on."""

import pytest
import tensorflow as tf

from tupe_tf.training.distribution import describe_devices


def _gpus(count):
    return [
        tf.config.PhysicalDevice(f"/physical_device:GPU:{i}", "GPU")
        for i in range(count)
    ]


@pytest.fixture
def devices(monkeypatch):
    """Sets the physical devices TensorFlow lists: `devices(GPU=2)`."""

    def set_devices(built_with_cuda=True, **counts):
        def list_physical_devices(device_type=None):
            if device_type == "GPU":
                return _gpus(counts.get("GPU", 0))
            return [
                tf.config.PhysicalDevice(f"/physical_device:TPU:{i}", "TPU")
                for i in range(counts.get("TPU", 0))
            ]

        monkeypatch.setattr(
            tf.config, "list_physical_devices", list_physical_devices
        )
        monkeypatch.setattr(
            tf.config.experimental,
            "get_device_details",
            lambda device: {"device_name": "NVIDIA H200"},
        )
        monkeypatch.setattr(
            tf.test, "is_built_with_cuda", lambda: built_with_cuda
        )

    return set_devices


def test_the_line_names_what_this_machine_has():
    line = describe_devices()
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        assert line.startswith("training on 1 GPU: "), line
    else:
        assert line.startswith("training on the CPU: TensorFlow sees no GPU")


@pytest.mark.parametrize(
    "level, built_with_cuda, line",
    [
        (
            "3",
            True,
            "training on the CPU: TensorFlow sees no GPU "
            "(TF_CPP_MIN_LOG_LEVEL=0 shows why)",
        ),
        (
            "2",
            True,
            "training on the CPU: TensorFlow sees no GPU "
            "(TF_CPP_MIN_LOG_LEVEL=0 shows why)",
        ),
        # TensorFlow's own warnings say why.
        ("0", True, "training on the CPU: TensorFlow sees no GPU"),
        (None, True, "training on the CPU: TensorFlow sees no GPU"),
        # A build without CUDA has no GPU to miss.
        ("3", False, "training on the CPU: TensorFlow sees no GPU"),
    ],
)
def test_without_a_gpu_it_says_so_and_where_the_reason_is(
    devices, monkeypatch, level, built_with_cuda, line
):
    devices(built_with_cuda=built_with_cuda)
    if level is None:
        monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    else:
        monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", level)
    assert describe_devices("mirrored") == line


def test_gpus_by_name_and_the_ones_the_strategy_uses(devices):
    devices(GPU=1)
    assert describe_devices() == "training on 1 GPU: NVIDIA H200"
    devices(GPU=2)
    assert describe_devices("one_device") == (
        "training on 1 GPU: NVIDIA H200 (of 2; --strategy=mirrored trains on "
        "all)"
    )
    for strategy in ("mirrored", "multi_worker_mirrored"):
        assert describe_devices(strategy) == (
            "training on 2 GPUs: NVIDIA H200, NVIDIA H200"
        )


def test_a_tpu_strategy_counts_the_tpu_cores(devices):
    devices(TPU=8)
    assert describe_devices("tpu") == "training on 8 TPU cores"
    # A TPU reached by name: not listed before the strategy connects.
    devices()
    assert describe_devices("tpu") == (
        "training on a TPU: --strategy=tpu connects to it"
    )
