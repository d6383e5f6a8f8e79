r"""One CoLA fine-tuning epoch of a BERT-base TUPE-R converted from fairseq.

The TUPE authors' released TUPE-R cannot be downloaded here, so this writes
a checkpoint of its shapes with random weights, in the layout their
Trainer writes (the TUPE-R fixture's `args` and parameter names,
`--encoder-layers 12 --encoder-embed-dim 768 --encoder-attention-heads 12
--encoder-ffn-embed-dim 3072 --max-positions 512`, float16 tensors as their
`--fp16` training saves them), and a dictionary of their size
(`--nwordssrc 32768` in their preprocess/pretrain/process.sh: 32,768 ids
with fairseq's specials, then `<mask>`; the lines are the tokenization
fixture's dictionary, padded with `madeupword`s, its BPE codes the
tokenizer's). `scripts/convert_fairseq_checkpoint.py`'s converter turns it
into a preset; each round then fine-tunes one CoLA epoch on it as
`scripts/finetune_glue.py --recipe=tupe_paper` does (its classifier,
optimizer, schedule of 10 epochs, preprocessor and runtime defaults;
`finetune.build_run`; the epoch is of the rows trained on, the training
file less its selection split, 90% by default), timed by a callback from the epoch's start to its
end. The first step holds the tracing (and XLA compile); the epoch holds
the Python tokenization of the training set, as a run's first epoch does.
Each batch is padded to its longest example (`--pad_to_longest`, as
their runs do; `--nopad_to_longest` pads to --seq_length), truncated at
--seq_length (CoLA's sentences are far shorter than 128 tokens).

  python benchmarks/fairseq_finetune_epoch.py --rounds=2
  python benchmarks/fairseq_finetune_epoch.py --max_steps=3 --rounds=1 \
      --output=/tmp/smoke.json   # a smoke test

Writes the raw JSON (every round's epoch and first-step wall and CPU
seconds, steps, sequence length, preset and checkpoint bytes) to --output.
"""

import argparse
import collections
import os
import shutil
import tempfile
import time

# TensorFlow reads this as it loads, with the imports below: no C++ INFO,
# WARNING or ERROR lines unless the user sets it.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import harness  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402
from absl import app  # noqa: E402
from absl import flags  # noqa: E402

from tupe_tf.training import config as config_lib  # noqa: E402
from tupe_tf.training import distribution  # noqa: E402
from tupe_tf.training import finetune  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(REPO, "tests", "fixtures")
ARGS_FIXTURE = os.path.join(
    FIXTURES, "fairseq_checkpoint", "tupe-r_fp32_zip.pt"
)
TOKENIZATION = os.path.join(FIXTURES, "fairseq_tokenization")
# Their dictionary: 32,768 ids with fairseq's 7 specials, then <mask>.
DICTIONARY_IDS = 32768
NUM_SPECIALS = 7
BERT_BASE = dict(
    encoder_layers=12,
    encoder_embed_dim=768,
    encoder_attention_heads=12,
    encoder_ffn_embed_dim=3072,
    max_positions=512,
    tokens_per_sample=512,
    fp16=True,
)

FLAGS = harness.define_round_flags(rounds=2)
flags.DEFINE_integer(
    "max_steps",
    None,
    "Steps per round (default: the whole epoch).",
    lower_bound=1,
)
flags.DEFINE_integer(
    "seq_length",
    config_lib.GlueConfig().seq_length,
    "Packed length (finetune_glue.py's default).",
    lower_bound=3,
)
flags.DEFINE_bool(
    "pad_to_longest",
    True,
    "Pad each batch to its longest example (finetune_glue.py's flag).",
)
flags.DEFINE_string(
    "glue_dir", os.path.join(REPO, "..", "shared", "data", "glue"), "GLUE TSVs."
)
flags.DEFINE_string(
    "work_dir",
    None,
    "Where the checkpoint and preset go (default: a "
    "temporary directory, removed at the end).",
)
flags.DEFINE_string(
    "output",
    "benchmarks/results/fairseq_finetune_epoch.json",
    "Where the raw JSON goes.",
)


def parameter_shape(name, args, vocab, buckets):
    """The shape of their parameter `name` at `args`' dims: the TUPE-R
    fixture's names, torch's `(out, in)` for a `Linear`'s weight."""
    d, f = args["encoder_embed_dim"], args["encoder_ffn_embed_dim"]
    by_suffix = (
        ("embed_tokens.weight", (vocab, d)),
        ("lm_head.weight", (vocab, d)),
        ("lm_head.bias", (vocab,)),
        ("sentence_encoder.pos.weight", (args["max_positions"] + 1, d)),
        (
            "relative_attention_bias.weight",
            (buckets, args["encoder_attention_heads"]),
        ),
        ("in_proj_weight", (3 * d, d)),
        ("in_proj_bias", (3 * d,)),
        ("fc1.weight", (f, d)),
        ("fc1.bias", (f,)),
        ("fc2.weight", (d, f)),
        ("_linear.weight", (d, d)),  # pos_q_linear, pos_k_linear
        ("out_proj.weight", (d, d)),
        ("dense.weight", (d, d)),
    )
    for suffix, shape in by_suffix:
        if name.endswith(suffix):
            return shape
    if name.endswith(".bias") or "norm." in name or "_ln." in name:
        return (d,)
    raise ValueError(f"No shape known for their parameter {name}.")


def write_checkpoint(path, vocab):
    """A BERT-base TUPE-R checkpoint as their Trainer saves it, random
    float16 weights; returns its size in bytes."""
    import torch

    from tupe_tf.convert import torch_pickle

    fixture, _ = torch_pickle.load_torch_file(ARGS_FIXTURE)
    args = vars(fixture["args"])
    args.update(BERT_BASE)
    buckets = fixture["model"][
        "decoder.sentence_encoder.relative_attention_bias.weight"
    ].shape[0]  # fixed in their code
    names = []
    for name in fixture["model"]:
        if ".layers.0." in name:
            names += [
                name.replace(".layers.0.", f".layers.{i}.")
                for i in range(args["encoder_layers"])
            ]
        elif ".layers." not in name:
            names.append(name)
    generator = torch.Generator().manual_seed(0)
    model = collections.OrderedDict(
        (
            name,
            (
                torch.randn(
                    parameter_shape(name, args, vocab, buckets),
                    generator=generator,
                )
                * 0.02
            ).half(),
        )
        for name in names
    )
    # Their masked-LM head is tied to the token embedding.
    model["decoder.lm_head.weight"] = model[
        "decoder.sentence_encoder.embed_tokens.weight"
    ]
    torch.save(
        {
            "args": argparse.Namespace(**args),
            "model": model,
            "optimizer_history": fixture["optimizer_history"],
            "extra_state": {},
            "last_optimizer_state": {},
        },
        path,
    )
    return os.path.getsize(path)


def write_tokenizer_files(directory):
    """`(dict.txt, bpe-code)`: the tokenization fixture's, the dictionary
    padded to their size."""
    with open(os.path.join(TOKENIZATION, "dict.txt"), encoding="utf-8") as f:
        lines = f.read().splitlines()
    symbols = {line.rsplit(" ", 1)[0] for line in lines}
    filler = (f"madeupword{n:04d}" for n in range(10**6))
    while len(lines) < DICTIONARY_IDS - NUM_SPECIALS:
        word = next(filler)
        if word not in symbols:
            lines.append(f"{word} 0")
    dictionary = os.path.join(directory, "dict.txt")
    with open(dictionary, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return dictionary, os.path.join(TOKENIZATION, "bpe-code")


def directory_bytes(path):
    return sum(
        os.path.getsize(os.path.join(root, name))
        for root, _, names in os.walk(path)
        for name in names
    )


def convert(work_dir):
    """Writes the checkpoint and converts it; returns the preset and the
    figures of the conversion."""
    from tupe_tf.convert.convert_checkpoint import convert_fairseq_checkpoint

    dictionary, codes = write_tokenizer_files(work_dir)
    checkpoint = os.path.join(work_dir, "checkpoint_best.pt")
    vocab = DICTIONARY_IDS + 1  # <mask>
    checkpoint_bytes = write_checkpoint(checkpoint, vocab)
    preset = os.path.join(work_dir, "preset")
    start = time.perf_counter()
    conversion = convert_fairseq_checkpoint(
        checkpoint, dictionary, preset, codes, overwrite=True
    )
    return preset, {
        "backbone": conversion.backbone,
        "checkpoint_bytes": checkpoint_bytes,
        "conversion_seconds": time.perf_counter() - start,
        "preset_bytes": directory_bytes(preset),
        "preset_files": {
            name: directory_bytes(os.path.join(preset, name))
            if os.path.isdir(os.path.join(preset, name))
            else os.path.getsize(os.path.join(preset, name))
            for name in sorted(os.listdir(preset))
        },
    }


class EpochTimer(keras.callbacks.Callback):
    """`Timing`s (wall, CPU) of the epoch and of its first step."""

    def on_epoch_begin(self, epoch, logs=None):
        self.start = (time.perf_counter(), time.process_time())
        self.first_step = None

    def elapsed(self):
        return harness.Timing(
            time.perf_counter() - self.start[0],
            time.process_time() - self.start[1],
        )

    def on_train_batch_end(self, batch, logs=None):
        if self.first_step is None:
            self.first_step = self.elapsed()

    def on_epoch_end(self, epoch, logs=None):
        self.epoch = self.elapsed()


def finetune_epoch(config, prepared, seed):
    """One epoch (or `--max_steps`) of a fresh run: its round record."""
    model, train_ds, _, _ = finetune.build_run(
        config, prepared, config.learning_rates[0], seed
    )
    timer = EpochTimer()
    history = model.fit(
        train_ds,
        epochs=1,
        steps_per_epoch=FLAGS.max_steps,
        shuffle=False,
        callbacks=[timer],
        verbose=0,
    )
    assert np.isfinite(history.history["loss"][0]), history.history
    steps = FLAGS.max_steps or int(
        np.ceil(len(prepared.fit) / config.batch_size)
    )
    return {
        "epoch": timer.epoch,
        "first_step": timer.first_step,
        "steps": steps,
    }


def glue_config(preset, work_dir):
    """`scripts/finetune_glue.py --task=cola --recipe=tupe_paper` at the
    recipe's first learning rate."""
    return config_lib.GlueConfig(
        task="cola",
        preset=preset,
        glue_dir=FLAGS.glue_dir,
        output_dir=os.path.join(work_dir, "glue"),
        recipe="tupe_paper",
        learning_rates=[config_lib.PAPER_FINETUNE_RECIPE["learning_rates"][0]],
        seq_length=FLAGS.seq_length,
        pad_to_longest=FLAGS.pad_to_longest,
        verbose=0,
    )


def print_round(index, record):
    epoch, first, steps = record["epoch"], record["first_step"], record["steps"]
    steady = (epoch.wall - first.wall) / max(steps - 1, 1)
    print(
        f"round {index + 1}/{FLAGS.rounds}: {steps} steps in {epoch.wall:.1f} "
        f"s (first step {first.wall:.1f} s, then {steady:.1f} s/step)",
        flush=True,
    )


def main(argv):
    del argv
    work_dir = FLAGS.work_dir or tempfile.mkdtemp(prefix="fairseq_epoch_")
    os.makedirs(work_dir, exist_ok=True)
    try:
        preset, conversion = convert(work_dir)
        print(f"Converted: {conversion['preset_bytes'] / 1e6:.1f} MB preset")
        config = glue_config(preset, work_dir)
        prepared = finetune.prepare_glue(config)
        rounds = []
        for index in range(FLAGS.rounds):
            rounds.append(finetune_epoch(config, prepared, index))
            print_round(index, rounds[-1])
    finally:
        if FLAGS.work_dir is None:
            shutil.rmtree(work_dir, ignore_errors=True)
    harness.write_json(
        FLAGS.output,
        {"epoch": [r["epoch"] for r in rounds]},
        rounds=rounds,
        machine=harness.machine(),
        seq_length=config.seq_length,
        pad_to_longest=config.pad_to_longest,
        batch_size=config.batch_size,
        num_train_examples=len(prepared[2]),
        jit_compile=distribution.jit_compile(config.runtime),
        **conversion,
    )


if __name__ == "__main__":
    app.run(main)
