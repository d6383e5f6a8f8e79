"""The micro study the tests of tupe_tf.analysis run: its data
(`build_tiny_data`, the `tiny_data` fixture of conftest.py) and settings
(`micro_config`)."""

import os

from tests.training.conftest import SHUFFLE_BUFFER
from tupe_tf.analysis import compare

SEQ = 16


def build_tiny_data(root):
    """Shards of a slice of the embedded corpus at 1x, 2x and 4x `SEQ`, its
    vocabulary and a tiny SST-2 under `root` (a `pathlib.Path`)."""
    import data_pipeline

    corpus = root / "corpus.txt"
    with open(data_pipeline.embedded_corpus_path()) as f:
        corpus.write_text(f.read(30_000))
    vocab = str(root / "vocab.txt")
    data_pipeline.build_vocabulary(str(corpus), 300, vocab, lowercase=True)

    def shards(length, num_shards):
        directory = root / f"shards_{length}"
        data_pipeline.build_shards(
            data_pipeline.ShardConfig(
                input_patterns=str(corpus),
                vocab_file=vocab,
                output_dir=str(directory),
                max_seq_length=length,
                num_shards=num_shards,
                lowercase=True,
            )
        )
        return sorted(
            str(directory / f)
            for f in os.listdir(directory)
            if f.endswith(".tfrecord")
        )

    train = shards(SEQ, 2)
    glue = root / "glue"
    (glue / "SST-2").mkdir(parents=True)
    rows = ["sentence\tlabel"] + [
        f"{'a good fine film' if i % 2 else 'a bad dull movie'} {i}\t{i % 2}"
        for i in range(24)
    ]
    for split in ("train", "dev"):
        (glue / "SST-2" / f"{split}.tsv").write_text("\n".join(rows) + "\n")
    return {
        "train": train[:1],
        "eval": {
            SEQ: train[1:],
            2 * SEQ: shards(2 * SEQ, 1),
            4 * SEQ: shards(4 * SEQ, 1),
        },
        "vocab": vocab,
        "glue": str(glue),
    }


def micro_config(tmp_path, data, **changes):
    """The micro study; `changes` as `CompareConfig.replace` takes them."""
    config = compare.CompareConfig().replace(
        results_dir=str(tmp_path / "results"),
        figures_dir=str(tmp_path / "figures"),
        output_dir=str(tmp_path / "runs"),
        variants=["bert", "tupe-r"],
        seeds=[0, 1],
        other_seeds=[0],
        extrapolation_factors=[2],
        beyond_table_factors=[4],
        eval_interval=2,
        glue_tasks=["sst2"],
        eval_files=data["eval"],
        pretrain=dict(
            seq_length=SEQ,
            global_batch_size=8,
            num_train_steps=4,
            eval_steps=2,
            shuffle_buffer=SHUFFLE_BUFFER,
            train_files=data["train"],
            vocab_file=data["vocab"],
            model=dict(
                num_layers=2, num_heads=2, hidden_dim=32, intermediate_dim=64
            ),
            # XLA's compile time outweighs 4 steps; the study's default
            # (XLA) trains as pre-training's and fine-tuning's tests check.
            runtime=dict(jit_compile=False),
        ),
        finetune=dict(
            glue_dir=data["glue"],
            seeds=[0],
            num_epochs=1,
            seq_length=16,
            runtime=dict(jit_compile=False),
        ),
    )
    return config.replace(**changes)


XLA = dict(pretrain=dict(runtime=dict(jit_compile=True)))
NO_GLUE = dict(finetune=dict(glue_dir=None))
