"""Start-up and shut-down costs of the data-pipeline command-line tools.

A shard-building process can spend more time importing and tearing down
TensorFlow than tokenizing its corpus (`python benchmarks/shard_building.py`
prints the whole-process figures):

- `import tensorflow` eagerly imports Keras, and Keras opportunistically
  imports IPython (`keras.src.saving.file_editor`) and matplotlib
  (`keras.src.visualization`) when installed, which the tools never use.
  Both imports are optional in Keras (guarded by `except ImportError`).
- Interpreter shut-down (module teardown, TensorFlow's static destructors)
  is slow; a finished tool can skip it with `os._exit` once its outputs
  are closed and its streams flushed.

Only the command-line mains call these; the library never does.
"""

import logging
import os
import sys

# Keras imports these only to support notebooks and plotting.
UNUSED_OPTIONAL_MODULES = ("IPython", "matplotlib")


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

    Only for a tool whose files are all closed (shards, manifest): it skips
    interpreter teardown and `atexit` handlers.
    """
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)  # pylint: disable=protected-access
