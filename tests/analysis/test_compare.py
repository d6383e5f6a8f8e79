"""compare.py end to end at a micro scale: real shards, real training."""

import json
import os

import matplotlib.image
import pytest

from tupe_tf.analysis import compare

SEQ = 32


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory):
    import data_pipeline

    root = tmp_path_factory.mktemp("compare_data")
    corpus = root / "corpus.txt"
    with open(data_pipeline.embedded_corpus_path()) as f:
        corpus.write_text(f.read(60_000))
    vocab = str(root / "vocab.txt")
    data_pipeline.build_vocabulary(str(corpus), 300, vocab, lowercase=True)
    data_pipeline.build_shards(
        data_pipeline.ShardConfig(
            input_patterns=str(corpus),
            vocab_file=vocab,
            output_dir=str(root / "shards"),
            max_seq_length=SEQ,
            num_shards=2,
            lowercase=True,
        )
    )
    files = sorted(
        str(root / "shards" / f)
        for f in os.listdir(root / "shards")
        if ".tfrecord" in f
    )
    # A tiny GLUE directory in the official layout.
    glue = root / "glue"
    (glue / "SST-2").mkdir(parents=True)
    rows = ["sentence\tlabel"] + [
        f"{'a good fine film' if i % 2 else 'a bad dull movie'} {i}\t{i % 2}"
        for i in range(40)
    ]
    for split in ("train", "dev"):
        (glue / "SST-2" / f"{split}.tsv").write_text("\n".join(rows) + "\n")
    return {
        "train": files[:1],
        "eval": files[1:],
        "vocab": vocab,
        "glue": str(glue),
    }


def test_run_comparison_writes_curves_and_table(tmp_path, tiny_data):
    config = compare.CompareConfig(
        output_dir=str(tmp_path / "out"),
        variants=["bert", "tupe-r"],
        seq_length=SEQ,
        global_batch_size=8,
        num_train_steps=4,
        eval_interval=2,
        eval_steps=2,
        glue_dir=tiny_data["glue"],
        glue_tasks=["sst2"],
        glue_seeds=[0, 1],
        glue_epochs=1,
        glue_seq_length=16,
        glue_max_train_examples=16,
        train_files=tiny_data["train"],
        eval_files=tiny_data["eval"],
        vocab_file=tiny_data["vocab"],
        model_dims=dict(
            num_layers=2, num_heads=2, hidden_dim=32, intermediate_dim=64
        ),
    )
    results = compare.run_comparison(config)
    for name in ("bert", "tupe-r"):
        curve = results["curves"][name]
        assert curve["steps"] == [2, 4]
        assert len(curve["val_loss"]) == 2
        assert 0 <= results["glue"][name]["sst2"]["median"] <= 1
    saved = json.loads((tmp_path / "out" / "comparison.json").read_text())
    assert saved["table_markdown"].startswith("| variant |")
    assert "tupe-r" in (tmp_path / "out" / "comparison.md").read_text()
    assert matplotlib.image.imread(results["curve_png"]).shape[0] > 100


def test_bad_compare_config_is_refused(tmp_path):
    with pytest.raises(ValueError, match="--variants"):
        compare.validate_compare_config(
            compare.CompareConfig(variants=["tupe-x"])
        )
    with pytest.raises(ValueError, match="--glue_dir"):
        compare.validate_compare_config(
            compare.CompareConfig(glue_dir=str(tmp_path / "missing"))
        )
