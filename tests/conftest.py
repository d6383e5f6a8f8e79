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


# The modules that take longest, longest first (`--durations`): under
# `-n 2` they start first and the short ones fill in at the end. The list
# orders the work only; a module missing from it runs after these.
LONGEST_MODULES = (
    "tests/export/test_runtime_exports.py",
    "tests/training/test_preemption.py",
    "tests/export/test_rope_alibi_exports.py",
    "tests/analysis/test_compare.py",
    "tests/models/test_backbone_compilation.py",
    "tests/models/test_tupe_backbone.py",
    # With the other modules of the `exports` fixture (below).
    "tests/export/test_export_lib.py",
    "tests/training/test_modern_options_scripts.py",
    "tests/training/test_finetune.py",
    "tests/training/test_gradient_accumulation.py",
    "tests/models/test_backend_training.py",
    "tests/training/test_user_errors.py",
    "tests/training/test_pretrain.py",
    "tests/data_pipeline/test_script_errors.py",
    "tests/models/test_cross_backend_presets.py",
    "tests/training/test_two_phase_recipe.py",
)


# Session fixtures too costly to build on both workers, and the modules that
# use them: pytest-xdist runs these modules on one worker, as one scope.
SHARED_FIXTURE_MODULES = {
    # tests/export/conftest.py: two presets, five exports.
    "exports": (
        "tests/export/test_export_lib.py",
        "tests/export/test_hub_encoder.py",
        "tests/export/test_hub_preprocessor.py",
        "tests/export/test_loading_in_fresh_process.py",
        "tests/export/test_serving.py",
    ),
}


@pytest.hookimpl(optionalhook=True)  # A pytest-xdist hook.
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadscope` with the modules of each `SHARED_FIXTURE_MODULES`
    fixture in one scope (pytest-xdist's scopes are modules and classes:
    `LoadScopeScheduling._split_scope`)."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    shared = {
        module: f"{fixture} fixture"
        for fixture, modules in SHARED_FIXTURE_MODULES.items()
        for module in modules
    }

    class SharedFixtureScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            scope = super()._split_scope(nodeid)
            return shared.get(scope.split("::")[0], scope)

    return SharedFixtureScheduling(config, log)


def _check_shared_fixture_modules(items):
    for item in items:
        for fixture, modules in SHARED_FIXTURE_MODULES.items():
            if fixture in item.fixturenames and _module(item) not in modules:
                raise pytest.UsageError(
                    f"{_module(item)} uses the `{fixture}` fixture: add it "
                    "to SHARED_FIXTURE_MODULES in tests/conftest.py."
                )


def pytest_collection_modifyitems(config, items):
    """The modules of `LONGEST_MODULES` first, in its order, then those
    with the most `large` tests; each module kept whole.

    pytest.ini distributes whole modules (`--dist loadscope`), so a module's
    fixtures are built once, in this order (`--no-loadscope-reorder`: by
    default pytest-xdist orders modules by their number of tests).
    """
    _check_shared_fixture_modules(items)
    rank = {module: index for index, module in enumerate(LONGEST_MODULES)}
    large = collections.Counter(
        _module(item) for item in items if item.get_closest_marker("large")
    )
    first_index = {}
    for index, item in enumerate(items):
        first_index.setdefault(_module(item), index)

    def order(item):
        module = _module(item)
        return (
            rank.get(module, len(rank)),
            -large[module],
            first_index[module],
        )

    items.sort(key=order)
