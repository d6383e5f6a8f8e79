"""Writes the fairseq checkpoint fixtures by running the TUPE authors' code.

For each case it builds a tiny BERT with their fairseq 0.8
(guolinke/TUPE) as their pre-training command does (`--task masked_lm
--arch bert_base --embedding-normalize`, `--rel-pos` for TUPE-R, `--fp16`
for the half-precision cases), with their own options parser, task, model,
criterion and `Trainer`; randomizes the parameters (so that attention is
far from uniform), trains a few steps of their masked-LM loss and saves the
checkpoint with `Trainer.save_checkpoint` (their `args`, `model`,
`optimizer_history`, `extra_state` with their meter objects,
`last_optimizer_state`). Torch writes it in the zip serialization or, as
torch before 1.6 did, the legacy one, with the model's tensors tagged as on
`cuda:0`, where their training leaves them. Their `load_checkpoint_to_cpu` then
reads it back into a new float32 model of theirs (half-precision weights
upcast), which runs a padded batch in eval mode.

Written under `--output_dir`: `dict.txt` (their dictionary, padded to a
multiple of 8 by their `Dictionary.finalize`), `<case>.pt` per case and
`outputs.npz` (the `input_ids`, `features/<case>` and `logits/<case>` at
every position, and the `symbols` of their task's dictionary by id). tests/models/test_fairseq_checkpoint.py converts the
checkpoints without their code.

Needs torch (a CPU build suffices) and a checkout of their repository
(`--tupe_dir`), imported from source: their Cython and CUDA parts are not
needed. Two stand-ins: `numpy.float` (removed from NumPy, used by their
code) and an empty `apex.normalization`, which their `Trainer` imports for
`--fp16` but does not use on CPU. Their code is not part of this
repository.

Example:

    git clone https://github.com/guolinke/TUPE /tmp/TUPE
    python scripts/make_fairseq_checkpoint_fixture.py --tupe_dir=/tmp/TUPE
"""

import contextlib
import functools
import json
import os
import sys
import tempfile
import types

import numpy as np
from make_tupe_reference_fixture import fixture_parser
from make_tupe_reference_fixture import parse_fixture_flags

# case -> (their --rel-pos, --fp16, torch serialization). Each variant,
# precision and serialization meets each of the others once.
CASES = {
    "tupe-r_fp32_zip": (True, False, "zip"),
    "tupe-r_fp16_legacy": (True, True, "legacy"),
    "tupe-a_fp32_legacy": (False, False, "legacy"),
    "tupe-a_fp16_zip": (False, True, "zip"),
}
SIZES = [
    "--encoder-layers=2",
    "--encoder-embed-dim=32",
    "--encoder-ffn-embed-dim=64",
    "--encoder-attention-heads=4",
    "--tokens-per-sample=160",
]
# The checked batch reaches past their relative buckets' max distance
# (128), so every bucket and the clipping are compared.
CHECKED_LENGTH = 150
TRAIN_LENGTH = 32
# Words of the dictionary: BPE pieces (`@@` continues a word), punctuation,
# non-ASCII; their `finalize` pads the 7 + 37 symbols to 48.
WORDS = (
    "the , . of and to a in th@@ is was he for it on as with @-@ ' "
    's@@ by at that his from caf@@ é un@@ known ( ) " an be 1@@ 9 -- '
    "über"
).split()
TRAIN_STEPS = 3
SEED = 0


def import_their_fairseq(tupe_dir):
    """Their `fairseq` package, from the checkout's source."""
    import numpy

    numpy.float = float  # their code predates its removal
    apex = types.ModuleType("apex")
    apex.normalization = types.ModuleType("apex.normalization")
    apex.normalization.FusedLayerNorm = None
    sys.modules.setdefault("apex", apex)
    sys.modules.setdefault("apex.normalization", apex.normalization)
    sys.path.insert(0, tupe_dir)
    import fairseq

    return fairseq


def write_dictionary(fairseq, data_dir):
    """Their `Dictionary` of `WORDS` (counts falling), saved as dict.txt."""
    from fairseq.data import Dictionary

    dictionary = Dictionary()
    for rank, word in enumerate(WORDS):
        dictionary.add_symbol(word, n=1000 - rank)
    dictionary.finalize(padding_factor=8)
    path = os.path.join(data_dir, "dict.txt")
    dictionary.save(path)
    return path


def their_args(data_dir, save_dir, rel_pos, fp16):
    """Their pre-training command line (README) at the tiny sizes."""
    from fairseq import options

    argv = [
        data_dir,
        "--task=masked_lm",
        "--criterion=masked_lm",
        "--arch=bert_base",
        *SIZES,
        "--optimizer=adam",
        "--adam-betas=(0.9, 0.999)",
        "--adam-eps=1e-6",
        "--clip-norm=1.0",
        "--lr-scheduler=polynomial_decay",
        "--lr=0.0001",
        "--warmup-updates=2",
        "--total-num-update=10",
        "--weight-decay=0.01",
        "--max-sentences=2",
        "--mask-prob=0.15",
        "--embedding-normalize",
        f"--save-dir={save_dir}",
        f"--seed={SEED}",
        "--cpu",
        *(["--rel-pos"] if rel_pos else []),
        *(["--fp16"] if fp16 else []),
    ]
    return options.parse_args_and_arch(options.get_training_parser(), argv)


def randomize(model, generator):
    """Every parameter random and O(1) in effect, as in
    scripts/make_tupe_reference_fixture.py; the padding row of the token
    embedding stays zero, as their initialization leaves it."""
    import torch

    with torch.no_grad():
        for name, parameter in model.named_parameters():
            noise = torch.randn(parameter.shape, generator=generator)
            if "norm" in name or ".pos_ln." in name:
                base = 1.0 if name.endswith("weight") else 0.0
                parameter.copy_(base + 0.1 * noise)
            elif name.endswith("embed_tokens.weight"):
                parameter.copy_(0.02 * noise)
                parameter[1].zero_()
            else:
                parameter.copy_(0.2 * noise)


def input_ids(generator, dictionary, length):
    """Two sequences of `length`: `<s> ... </s>`, the second padded from
    two thirds on."""
    import torch

    ids = torch.randint(
        dictionary.nspecial, len(dictionary), (2, length), generator=generator
    )
    ids[:, 0] = dictionary.bos()
    ids[0, -1] = dictionary.eos()
    end = length * 2 // 3
    ids[1, end - 1] = dictionary.eos()
    ids[1, end:] = dictionary.pad()
    return ids


def training_sample(ids, dictionary, generator):
    """A masked-LM batch of their task's layout: some tokens replaced by
    `<mask>`, the targets there, padding elsewhere."""
    import torch

    real = ids.ne(dictionary.pad()) & ids.ge(dictionary.nspecial)
    masked = real & (torch.rand(ids.shape, generator=generator) < 0.3)
    masked[:, 1] = True
    target = torch.where(masked, ids, torch.full_like(ids, dictionary.pad()))
    source = torch.where(masked, torch.full_like(ids, len(dictionary) - 1), ids)
    return {
        "id": torch.arange(ids.shape[0]),
        "nsentences": ids.shape[0],
        "ntokens": int(real.sum()),
        "net_input": {
            "src_tokens": source,
            "src_lengths": ids.ne(dictionary.pad()).sum(-1),
        },
        "target": target,
    }


@contextlib.contextmanager
def stored_as_on_gpu(tensors):
    """`torch.save` tags the storages of `tensors` with `cuda:0`, as their
    GPU training leaves the model's (`save_state` moves only the optimizer
    state to the CPU), so a reader must map them to the CPU."""
    import torch.serialization

    pointers = {tensor.untyped_storage().data_ptr() for tensor in tensors}
    tag = torch.serialization.location_tag

    def location_tag(storage):
        return "cuda:0" if storage.data_ptr() in pointers else tag(storage)

    torch.serialization.location_tag = location_tag
    try:
        yield
    finally:
        torch.serialization.location_tag = tag


@contextlib.contextmanager
def torch_serialization(kind):
    """`torch.save` as torch before 1.6 (`legacy`) or since (`zip`)."""
    import torch

    save = torch.save
    if kind == "legacy":
        torch.save = functools.partial(
            save, _use_new_zipfile_serialization=False
        )
    try:
        yield
    finally:
        torch.save = save


def save_their_checkpoint(args, path, serialization):
    """Trains `TRAIN_STEPS` steps with their `Trainer` and saves."""
    import torch
    from fairseq import tasks
    from fairseq.trainer import Trainer

    torch.manual_seed(SEED)
    generator = torch.Generator().manual_seed(SEED)
    task = tasks.setup_task(args)
    model = task.build_model(args)
    randomize(model, generator)
    trainer = Trainer(args, task, model, task.build_criterion(args))
    ids = input_ids(generator, task.source_dictionary, TRAIN_LENGTH)
    for _ in range(TRAIN_STEPS):
        sample = training_sample(ids, task.source_dictionary, generator)
        trainer.train_step([sample])
    # What their checkpoint_utils.save_checkpoint passes.
    extra_state = {
        "train_iterator": {"epoch": 1, "iterations_in_epoch": TRAIN_STEPS},
        "val_loss": 5.0,
        "best": 5.0,
    }
    with (
        torch_serialization(serialization),
        stored_as_on_gpu(trainer.get_model().state_dict().values()),
    ):
        trainer.save_checkpoint(path, extra_state)
    return task


def their_outputs(path, ids):
    """Their loader and a new float32 model of theirs on `ids`."""
    import torch
    from fairseq import checkpoint_utils
    from fairseq import tasks

    # Their `torch.load` as torch before 2.6 ran it (it unpickles their
    # meters); the file is the one just written.
    os.environ["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = "1"
    state = checkpoint_utils.load_checkpoint_to_cpu(path)
    args = state["args"]
    task = tasks.setup_task(args)
    model = task.build_model(args).float()
    model.load_state_dict(state["model"], strict=True)
    model.eval()
    with torch.no_grad():
        features, _ = model(ids, features_only=True)
        logits = model.decoder.output_layer(features)
    return features.numpy(), logits.numpy()


def make_fixtures(tupe_dir, output_dir):
    import torch

    fairseq = import_their_fairseq(tupe_dir)
    os.makedirs(output_dir, exist_ok=True)
    data_dir = tempfile.mkdtemp()
    dict_path = write_dictionary(fairseq, data_dir)
    with (
        open(dict_path) as source,
        open(os.path.join(output_dir, "dict.txt"), "w") as target,
    ):
        target.write(source.read())
    arrays = {}
    for case, (rel_pos, fp16, serialization) in CASES.items():
        path = os.path.join(output_dir, f"{case}.pt")
        args = their_args(data_dir, data_dir, rel_pos, fp16)
        task = save_their_checkpoint(args, path, serialization)
        if "input_ids" not in arrays:
            generator = torch.Generator().manual_seed(SEED + 1)
            arrays["input_ids"] = input_ids(
                generator, task.source_dictionary, CHECKED_LENGTH
            )
            # Each id's symbol in their task's dictionary (`<mask>` added).
            arrays["symbols"] = np.array(
                json.dumps(task.source_dictionary.symbols)
            )
        features, logits = their_outputs(path, arrays["input_ids"])
        arrays[f"features/{case}"] = features.astype("float32")
        arrays[f"logits/{case}"] = logits.astype("float32")
        print(f"{path}: {os.path.getsize(path)} bytes")
    arrays["input_ids"] = arrays["input_ids"].numpy().astype("int32")
    arrays["cases"] = np.array(json.dumps(CASES))
    outputs = os.path.join(output_dir, "outputs.npz")
    np.savez_compressed(outputs, **arrays)
    print(f"{outputs}: {os.path.getsize(outputs)} bytes")


def main(argv=None):
    parser = fixture_parser(
        __doc__,
        "its fairseq/ is used",
        "fairseq_checkpoint",
        "Where the checkpoints, dict.txt and outputs.npz go.",
    )
    flags = parse_fixture_flags(parser, argv, "trainer.py")
    make_fixtures(flags.tupe_dir, flags.output_dir)


if __name__ == "__main__":
    main()
