"""How the command-line tools start and end: a quiet console, and their
start-up and shut-down costs.

- TensorFlow's C++ libraries log to the console: on a machine without a
  GPU, "failed call to cuInit: INTERNAL: CUDA error" (an ERROR line a new
  user reads as a failure), and while they load, before they read any
  setting, absl's "All log messages before absl::InitializeLog() ..." and
  "Could not find cuda drivers". `quiet_tensorflow` silences both, so the
  first line a script prints is its own.

A shard-building process can spend more time importing and tearing down
TensorFlow than tokenizing its corpus (`python benchmarks/shard_building.py`
prints the whole-process figures):

- `import tensorflow` eagerly imports Keras, and Keras opportunistically
  imports IPython (`keras.src.saving.file_editor`) and matplotlib
  (`keras.src.visualization`) when installed, which the tools that draw
  no figures never use. Both imports are optional in Keras (guarded by
  `except ImportError`).
- Interpreter shut-down (module teardown, TensorFlow's static destructors)
  takes about a second; a finished tool skips it with `os._exit` once its
  outputs are closed and its streams flushed (`cli.run` does, for every
  script that loaded TensorFlow).

Only the command-line mains call these; the library never does.
"""

import contextlib
import importlib.abc
import importlib.util
import logging
import os
import sys

# Keras imports these only to support notebooks and plotting.
UNUSED_OPTIONAL_MODULES = ("IPython", "matplotlib")


@contextlib.contextmanager
def _stderr_silenced():
    """Sends file descriptor 2, where C++ code writes, to /dev/null."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    os.close(devnull)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


class _QuietTensorFlowImport(importlib.abc.MetaPathFinder):
    """Silences stderr while the `tensorflow` package itself loads (an
    import error still raises, and is printed after)."""

    def find_spec(self, name, path=None, target=None):
        if name != "tensorflow":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        load = spec.loader.exec_module

        def exec_module(module):
            with _stderr_silenced():
                load(module)

        spec.loader.exec_module = exec_module
        return spec


def quiet_tensorflow():
    """Quiets TensorFlow's C++ logging in this process: sets
    `TF_CPP_MIN_LOG_LEVEL=3` (no C++ INFO, WARNING or ERROR lines; the
    Python errors still raise) and silences stderr while TensorFlow loads,
    whenever it is first imported.

    A user's own `TF_CPP_MIN_LOG_LEVEL` wins (and then nothing is
    silenced). Must run before TensorFlow is imported; later it does
    nothing.

    Example:
    >>> quiet_tensorflow()  # doctest: +SKIP
    >>> from tupe_tf.training import pretrain  # Loads TensorFlow quietly.  # doctest: +SKIP
    """
    if "TF_CPP_MIN_LOG_LEVEL" in os.environ or "tensorflow" in sys.modules:
        return
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    sys.meta_path.insert(0, _QuietTensorFlowImport())


def skip_unused_optional_imports(modules=UNUSED_OPTIONAL_MODULES):
    """Makes `import <module>` fail fast for modules this process never uses.

    Must run before TensorFlow is imported. A module that is already imported
    is left alone, so calling this late is harmless (just useless).

    Args:
      modules: top-level module names.

    Returns:
      The names that were marked unavailable.

    Example:
    >>> skip_unused_optional_imports()  # doctest: +SKIP
    >>> import tensorflow  # Keras now skips IPython and matplotlib.  # doctest: +SKIP
    """
    skipped = []
    for name in modules:
        if name not in sys.modules:
            sys.modules[name] = None  # Python's marker for "not importable".
            skipped.append(name)
    return skipped


def exit_without_teardown(code=0):
    """Flushes logs and standard streams, then ends the process at once.

    Only for a tool whose files are all closed and whose threads have
    nothing left to write: it skips interpreter teardown, `atexit` handlers
    and the joining of threads.
    """
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)  # pylint: disable=protected-access
