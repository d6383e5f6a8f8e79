import collections
import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# XLA's LLVM passes make compiled CPU code faster, not different: tests check
# what a step computes (benchmarks/ time it), so they skip that compile time.
# The scripts the tests start inherit it.
os.environ.setdefault("XLA_FLAGS", "--xla_backend_optimization_level=0")

import keras  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _fresh_keras_state():
    """Each test starts from float32 and a fixed seed."""
    keras.config.set_dtype_policy("float32")
    keras.utils.set_random_seed(1234)
    yield
    keras.config.set_dtype_policy("float32")


def _module(item):
    return item.nodeid.split("::")[0]


def pytest_collection_modifyitems(config, items):
    """Modules with the most `large` tests first, each kept whole.

    pytest.ini distributes whole modules (`--dist loadscope`), so a module's
    fixtures are built once; under `-n 2` the longest modules then start
    first and the short ones fill in at the end.
    """
    large = collections.Counter(
        _module(item) for item in items if item.get_closest_marker("large")
    )
    first_index = {}
    for index, item in enumerate(items):
        first_index.setdefault(_module(item), index)
    items.sort(
        key=lambda item: (-large[_module(item)], first_index[_module(item)])
    )
