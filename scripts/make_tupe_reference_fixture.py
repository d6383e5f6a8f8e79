"""Writes the TUPE reference fixtures by running the authors' own code.

Builds a tiny BERT of the TUPE authors' fairseq code (guolinke/TUPE:
`fairseq/modules/transformer_sentence_encoder.py`, its layer, its
`multihead_attention.py` and `fairseq/models/bert/model.py`'s `BertEncoder`
with `BertLMHead`), as their `bert_base` builds it (`--embedding-normalize`,
exact GELU, LayerNorm epsilon 1e-5, no segments), randomizes every parameter
and runs a fixed padded batch in eval mode on CPU. For each variant it saves
`tupe_reference_<variant>.npz`: every state-dict array under
`state/<name>`, the `input_ids`, the `features` (last layer) and the MLM
`logits` at every position, and the model settings as JSON (`config`).

Only those five modules of their repository are imported (the rest of
fairseq is replaced by small stand-ins), from the checkout given by
`--tupe_dir`; their code is not part of this repository. Needs torch (a CPU
build suffices); tests/models/test_tupe_reference.py reads the fixtures
with neither torch nor their code.

Example:

    git clone https://github.com/guolinke/TUPE /tmp/TUPE
    python scripts/make_tupe_reference_fixture.py --tupe_dir=/tmp/TUPE
"""

import argparse
import importlib.util
import json
import os
import sys
import types

import numpy as np

CONFIG = dict(
    vocabulary_size=50,
    num_layers=2,
    num_heads=4,
    hidden_dim=32,
    intermediate_dim=64,
    max_sequence_length=16,
    pad_id=1,
)
VARIANTS = {"tupe-r": True, "tupe-a": False}  # variant -> their --rel-pos
SEED = 0
# Where the fixture scripts write by default.
FIXTURES_DIR = os.path.normpath(
    os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures")
)


def fixture_parser(doc, tupe_dir_use, output_dir, output_help):
    """A fixture script's parser: `--tupe_dir`, a checkout of their code
    (`tupe_dir_use` says what of it is used), and `--output_dir`
    (`output_dir` under tests/fixtures/ unless set)."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument(
        "--tupe_dir",
        required=True,
        help=f"A checkout of github.com/guolinke/TUPE ({tupe_dir_use}).",
    )
    parser.add_argument(
        "--output_dir",
        default=os.path.normpath(os.path.join(FIXTURES_DIR, output_dir)),
        help=output_help,
    )
    return parser


def parse_fixture_flags(parser, argv, required):
    """The flags; `parser.error` unless `--tupe_dir` has the file
    `fairseq/<required>`."""
    flags = parser.parse_args(argv)
    if not os.path.isfile(os.path.join(flags.tupe_dir, "fairseq", required)):
        parser.error(f"--tupe_dir={flags.tupe_dir} has no fairseq/{required}.")
    return flags


def stand_in_package(name):
    """An empty package `name` in `sys.modules`: their modules load under
    it without the rest of fairseq."""
    package = types.ModuleType(name)
    package.__path__ = []
    sys.modules[name] = package
    return package


def load_module(name, path):
    """Imports the file `path` as the module `name`."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def import_authors_encoder(tupe_dir):
    """Their `BertEncoder`, with stand-ins for the rest of fairseq."""
    import torch.nn as nn

    source = os.path.join(tupe_dir, "fairseq")
    package = stand_in_package("fairseq")
    modules = types.ModuleType("fairseq.modules")
    sys.modules["fairseq.modules"] = package.modules = modules
    for name in ("gelu", "layer_norm"):
        loaded = load_module(
            f"fairseq.modules.{name}",
            os.path.join(source, "modules", f"{name}.py"),
        )
        vars(modules).update(
            {k: v for k, v in vars(loaded).items() if not k.startswith("_")}
        )
    package.utils = load_module(
        "fairseq.utils", os.path.join(source, "utils.py")
    )
    for name, attribute in (
        ("multihead_attention", "MultiheadAttention"),
        (
            "transformer_sentence_encoder_layer",
            "TransformerSentenceEncoderLayer",
        ),
        ("transformer_sentence_encoder", "TransformerSentenceEncoder"),
    ):
        loaded = load_module(
            f"fairseq.modules.{name}",
            os.path.join(source, "modules", f"{name}.py"),
        )
        setattr(modules, attribute, getattr(loaded, attribute))

    class FairseqDecoder(nn.Module):
        def __init__(self, dictionary):
            super().__init__()
            self.dictionary = dictionary

    models = types.ModuleType("fairseq.models")
    models.FairseqDecoder = FairseqDecoder
    models.FairseqLanguageModel = nn.Module
    models.register_model = lambda name: lambda cls: cls
    models.register_model_architecture = lambda *names: lambda fn: fn
    sys.modules["fairseq.models"] = package.models = models
    bert = load_module(
        "fairseq.models.bert.model",
        os.path.join(source, "models", "bert", "model.py"),
    )
    return bert


class Dictionary:
    """What `BertEncoder` reads of a fairseq dictionary."""

    def __len__(self):
        return CONFIG["vocabulary_size"]

    def pad(self):
        return CONFIG["pad_id"]


def authors_args(bert, rel_pos):
    """Their `bert_base` arguments at the tiny dimensions."""
    args = argparse.Namespace(
        encoder_layers=CONFIG["num_layers"],
        encoder_embed_dim=CONFIG["hidden_dim"],
        encoder_ffn_embed_dim=CONFIG["intermediate_dim"],
        encoder_attention_heads=CONFIG["num_heads"],
        max_positions=CONFIG["max_sequence_length"],
        embedding_normalize=True,
        rel_pos=rel_pos,
    )
    bert.bert_base_architecture(args)  # their defaults for the rest
    return args


def randomize(model, generator):
    """Every parameter random and O(1) in effect: LayerNorm scales around
    1, biases and the position/relative tables around 0, linear weights
    large enough for non-uniform attention; token embeddings keep BERT's
    0.02, so the embedding LayerNorm's epsilon matters as in training."""
    import torch

    with torch.no_grad():
        for name, parameter in model.named_parameters():
            noise = torch.randn(parameter.shape, generator=generator)
            if "norm" in name or name.startswith("sentence_encoder.pos_ln"):
                base = 1.0 if name.endswith("weight") else 0.0
                parameter.copy_(base + 0.1 * noise)
            elif name.endswith("embed_tokens.weight"):
                parameter.copy_(0.02 * noise)
            else:
                parameter.copy_(0.2 * noise)


def input_ids(generator):
    """Two sequences of 12: `[CLS]`-like id 0 first; the second padded."""
    import torch

    ids = torch.randint(
        4, CONFIG["vocabulary_size"], (2, 12), generator=generator
    )
    ids[:, 0] = 0
    ids[1, 8:] = CONFIG["pad_id"]
    return ids


def make_fixture(bert, rel_pos):
    import torch

    generator = torch.Generator().manual_seed(SEED)
    encoder = bert.BertEncoder(authors_args(bert, rel_pos), Dictionary())
    randomize(encoder, generator)
    encoder.eval()
    ids = input_ids(generator)
    with torch.no_grad():
        features, _ = encoder(ids, features_only=True)
        logits = encoder.output_layer(features)
    arrays = {
        f"state/{name}": value.numpy().astype("float32")
        for name, value in encoder.state_dict().items()
        if value.is_floating_point()
    }
    arrays["input_ids"] = ids.numpy().astype("int32")
    arrays["features"] = features.numpy().astype("float32")
    arrays["logits"] = logits.numpy().astype("float32")
    arrays["config"] = np.array(json.dumps(CONFIG))
    return arrays


def main(argv=None):
    parser = fixture_parser(
        __doc__, "its fairseq/ is read", "", "Where the .npz fixtures go."
    )
    flags = parse_fixture_flags(
        parser, argv, "modules/transformer_sentence_encoder.py"
    )
    bert = import_authors_encoder(flags.tupe_dir)
    os.makedirs(flags.output_dir, exist_ok=True)
    for variant, rel_pos in VARIANTS.items():
        path = os.path.join(flags.output_dir, f"tupe_reference_{variant}.npz")
        np.savez_compressed(path, **make_fixture(bert, rel_pos))
        print(f"{path}: {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
