"""A package's public names, each loaded on first use (PEP 562).

Importing `tupe_tf`, `tupe_tf.training` or `tupe_tf.export` loads no Keras
or TensorFlow: a script reads and checks its flags first, and a light
subpackage (`tupe_tf.utils` from the data pipeline) stays light.

Example:
>>> __getattr__, __dir__ = lazy_names.module_functions(  # doctest: +SKIP
...     __name__, {"run_glue": "tupe_tf.training.finetune"}, __all__)
"""

import importlib
import sys


def module_functions(package, public, names):
    """The `__getattr__` and `__dir__` of a package with lazy names.

    Args:
        package: the package's `__name__`.
        public: `{name: the module that defines it}`; a name whose module
            is `<package>.<name>` is that module itself.
        names: the package's `__all__` (what `__dir__` lists).

    Returns:
        `(__getattr__, __dir__)`, to assign in the package's namespace.
    """

    def __getattr__(name):
        if name not in public:
            raise AttributeError(
                f"module {package!r} has no attribute {name!r}"
            )
        module = importlib.import_module(public[name])
        value = (
            module
            if module.__name__ == f"{package}.{name}"
            else getattr(module, name)
        )
        setattr(sys.modules[package], name, value)  # Loaded once.
        return value

    def __dir__():
        return list(names)

    return __getattr__, __dir__
