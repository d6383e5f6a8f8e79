"""Reading a `torch.save` file without running what it names.

A pickle names the callables that rebuild its objects; `torch.load` with
`weights_only=False` imports and calls them, so a checkpoint could run any
code, and a fairseq checkpoint names fairseq's classes (its meters), which
need fairseq installed. This reader lets through only what rebuilds tensors
(torch's own rebuild functions, sizes and dtypes; torch itself maps the
storages), `collections.OrderedDict`, `argparse.Namespace` and a few plain
builtins. Every other name becomes an inert `Stub` that keeps the pickled
arguments and state as data: nothing of it is imported or called.
"""

import argparse
import collections
import importlib
import pickle
import types
import zipfile

from tupe_tf.utils import extras

# Plain containers and values (`_codecs.encode` rebuilds `bytes` in the
# pickle protocol 2 that torch writes).
_PLAIN = {
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("argparse", "Namespace"): argparse.Namespace,
    ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset,
    ("builtins", "bytearray"): bytearray,
    ("builtins", "complex"): complex,
    ("builtins", "slice"): slice,
}
# What rebuilds a tensor or a parameter from its storage.
_TORCH_REBUILDERS = {
    "torch._utils": (
        "_rebuild_tensor",
        "_rebuild_tensor_v2",
        "_rebuild_tensor_v3",
        "_rebuild_parameter",
        "_rebuild_parameter_with_state",
    ),
    "torch._tensor": ("_rebuild_from_type_v2",),
    "torch.nn.parameter": ("Parameter",),
    "torch.serialization": ("_get_layout",),
    "torch": ("Size", "Tensor", "device"),
}


class Stub:
    """What stands for an object of a class or function the reader does
    not rebuild: the pickled arguments (`args`) and state (`state`), as
    data. Nothing is called; it cannot be pickled again."""

    qualified_name = "?"

    def __new__(cls, *args, **kwargs):
        instance = super().__new__(cls)
        instance.args = args
        instance.state = None
        return instance

    def __init__(self, *args, **kwargs):
        pass

    def __setstate__(self, state):
        self.state = state

    def __reduce__(self):
        raise TypeError(
            f"A stand-in for {self.qualified_name} is not pickled again."
        )

    def __repr__(self):
        return f"<stand-in for {self.qualified_name}>"


def _torch_global(torch, module, name):
    """The torch object `module.name` if it is one that rebuilds tensors
    (or is a dtype), else None."""
    if name in _TORCH_REBUILDERS.get(module, ()):
        return getattr(importlib.import_module(module), name, None)
    if module == "torch" and isinstance(
        getattr(torch, name, None), torch.dtype
    ):
        return getattr(torch, name)
    return None


def _pickle_module(torch, stubbed):
    """A module with `Unpickler` and `load`, as `torch.load`'s
    `pickle_module` argument expects; names of stubbed globals are added to
    the set `stubbed`."""
    stub_classes = {}

    class Unpickler(pickle.Unpickler):
        def find_class(self, module, name):
            allowed = _PLAIN.get((module, name))
            if allowed is None:
                allowed = _torch_global(torch, module, name)
            if allowed is not None:
                return allowed
            qualified = f"{module}.{name}"
            stubbed.add(qualified)
            if qualified not in stub_classes:
                stub_classes[qualified] = type(
                    name, (Stub,), {"qualified_name": qualified}
                )
            return stub_classes[qualified]

    module = types.ModuleType("tupe_tf_restricted_pickle")
    module.Unpickler = Unpickler
    module.load = lambda file, **kwargs: Unpickler(file, **kwargs).load()
    return module


def import_torch():
    """torch, or a `UserError` naming the `convert` extra."""
    return extras.import_extra(
        "torch", "convert", "Reading a PyTorch checkpoint"
    )


def load_torch_file(path):
    """The object a `torch.save` file holds, read with the restricted
    unpickler, every tensor on the CPU.

    Reads both serializations: the zip one (torch >= 1.6) and the legacy
    one (`_use_new_zipfile_serialization=False`, torch < 1.6).

    Args:
        path: the file.

    Returns:
        `(object, stubbed)`: the unpickled object, and the sorted names of
        the globals replaced by `Stub`s.

    Raises:
        UserError: torch is not installed.
        Exception: whatever torch or pickle raises for a file that is not a
            `torch.save` file, or is damaged (the caller names the file).

    Example:
    ```python
    state, stubbed = load_torch_file("checkpoint_best.pt")
    stubbed  # ['fairseq.meters.AverageMeter', ...]
    ```
    """
    torch = import_torch()
    stubbed = set()
    state = torch.load(
        path,
        map_location="cpu",
        pickle_module=_pickle_module(torch, stubbed),
        weights_only=False,
        # A zip file's storages are mapped, not read: a training
        # checkpoint's optimizer state (twice the model in float32 and
        # more) then costs no memory. The legacy format cannot be mapped.
        mmap=zipfile.is_zipfile(path),
    )
    return state, sorted(stubbed)
