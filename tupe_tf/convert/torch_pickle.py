"""Reading a `torch.save` file without running what it names.

A pickle names the callables that rebuild its objects, and a fairseq
checkpoint names fairseq's classes (its meters, in `extra_state`), which
need fairseq. `torch.load(weights_only=True)` rebuilds only what torch
allows (tensors, storages, containers, plain values) and refuses any other
name. This reader lets two kinds more through, for that one load
(`torch.serialization.safe_globals`): `argparse.Namespace` (fairseq's
`args`, a plain holder of attributes), and for every other name the file
holds an inert `Stub` class under that name, which keeps the pickled
arguments and state as data. Nothing of it is imported or called. A file
naming a module torch blocks (`os`, `sys`) is refused by torch whole.

The names are read from the file's pickle first (`pickletools`), in either
serialization; torch's own `get_unsafe_globals_in_checkpoint` reads zip
files only. A name torch rebuilds itself keeps torch's rebuild: its
allowlist comes before the names added here. Needs torch >= 2.6, whose
safe globals take a name (`(stand_in, "fairseq.meters.AverageMeter")`).
"""

import argparse
import io
import pickletools
import re
import zipfile

from tupe_tf.utils import extras
from tupe_tf.utils.errors import UserError

# The first torch whose `safe_globals` take `(object, name)` pairs.
MIN_TORCH = (2, 6)
# A legacy file (torch < 1.6, or `_use_new_zipfile_serialization=False`)
# is pickles one after another: the magic number, the protocol version,
# the system's sizes, then the saved object (its storages follow).
_LEGACY_PICKLES = 4


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


def _stand_in(qualified_name, used):
    """A `Stub` class for `qualified_name`; making an instance of it adds
    the name to the set `used`."""

    def __new__(cls, *args, **kwargs):
        used.add(qualified_name)
        return Stub.__new__(cls, *args, **kwargs)

    return type(
        qualified_name.rpartition(".")[2],
        (Stub,),
        {"qualified_name": qualified_name, "__new__": __new__},
    )


def _names_in_pickles(file, count):
    """`module.name` of every global the next `count` pickles of `file`
    name (GLOBAL and INST, the opcodes of the protocols torch writes)."""
    names = set()
    for _ in range(count):
        for opcode, argument, _ in pickletools.genops(file):
            if opcode.name in ("GLOBAL", "INST"):
                names.add(argument.replace(" ", "."))
    return names


def pickled_names(path):
    """The globals a `torch.save` file names, in either serialization.

    Args:
        path: the file.

    Returns:
        A set of `module.name` strings.

    Raises:
        ValueError: a zip file without a `torch.save` pickle; whatever
            `pickletools` raises for a file that is not a pickle.
    """
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            records = [
                name
                for name in archive.namelist()
                if re.fullmatch(r"[^/]+/data\.pkl", name)
            ]
            if len(records) != 1:
                raise ValueError(
                    "a zip file without the one data.pkl of torch.save"
                )
            data = io.BytesIO(archive.read(records[0]))
        return _names_in_pickles(data, 1)
    with open(path, "rb") as file:
        return _names_in_pickles(file, _LEGACY_PICKLES)


def import_torch():
    """torch, or a `UserError` naming the `convert` extra (or the version
    it needs)."""
    torch = extras.import_extra(
        "torch", "convert", "Reading a PyTorch checkpoint"
    )
    version = tuple(int(n) for n in re.findall(r"\d+", torch.__version__)[:2])
    if version < MIN_TORCH:
        raise UserError(
            "Reading a PyTorch checkpoint needs torch >= "
            f"{'.'.join(map(str, MIN_TORCH))} (torch.load with weights_only "
            f"and named safe globals); this is torch {torch.__version__}. "
            "Install tupe-tf[convert] (the README's line)."
        )
    return torch


def load_torch_file(path):
    """The object a `torch.save` file holds, read with
    `torch.load(weights_only=True)` and stand-ins, every tensor on the CPU.

    Reads both serializations: the zip one (torch >= 1.6) and the legacy
    one (`_use_new_zipfile_serialization=False`, torch < 1.6).

    Args:
        path: the file.

    Returns:
        `(object, stubbed)`: the unpickled object, and the sorted names of
        the globals replaced by `Stub`s.

    Raises:
        UserError: torch is not installed, or older than `MIN_TORCH`.
        Exception: whatever torch, pickle or `pickletools` raise for a file
            that is not a `torch.save` file, is damaged, or names a module
            torch blocks (the caller names the file).

    Example:
    ```python
    state, stubbed = load_torch_file("checkpoint_best.pt")
    stubbed  # ['fairseq.meters.AverageMeter', ...]
    ```
    """
    torch = import_torch()
    used = set()
    stand_ins = [
        (_stand_in(name, used), name)
        for name in sorted(pickled_names(path))
        if name != "argparse.Namespace"
    ]
    with torch.serialization.safe_globals([argparse.Namespace, *stand_ins]):
        state = torch.load(
            path,
            map_location="cpu",
            weights_only=True,
            # A zip file's storages are mapped, not read: a training
            # checkpoint's optimizer state (twice the model in float32 and
            # more) then costs no memory. The legacy format cannot be
            # mapped.
            mmap=zipfile.is_zipfile(path),
        )
    return state, sorted(used)
