import os

import pytest

from data_pipeline import default_data


@pytest.fixture
def fake_builders(monkeypatch):
    """Records the builder calls; writes empty vocabulary and shard files."""
    calls = []

    def build_vocabulary(input_patterns, vocab_size, output_file, lowercase):
        calls.append(("vocab", input_patterns, vocab_size, lowercase))
        open(output_file, "w").close()

    def build_shards(config):
        calls.append(("shards", config.num_shards, config.max_seq_length))
        os.makedirs(config.output_dir, exist_ok=True)
        for i in range(config.num_shards):
            name = f"pretrain-{i:05d}-of-{config.num_shards:05d}.tfrecord"
            open(os.path.join(config.output_dir, name), "w").close()

    monkeypatch.setattr(
        default_data.vocab_lib, "build_vocabulary", build_vocabulary
    )
    monkeypatch.setattr(default_data.shards, "build_shards", build_shards)
    return calls


def test_builds_then_holds_out_the_last_shard(tmp_path, fake_builders):
    data = default_data.prepare_default_data(
        str(tmp_path), seq_length=32, vocab_size=100, num_shards=3
    )
    assert fake_builders == [("vocab", None, 100, True), ("shards", 3, 32)]
    shard_dir = os.path.join(str(tmp_path), "shards_32")
    assert data.shard_dir == shard_dir
    assert [os.path.basename(f) for f in data.train_files] == [
        "pretrain-00000-of-00003.tfrecord",
        "pretrain-00001-of-00003.tfrecord",
    ]
    assert [os.path.basename(f) for f in data.eval_files] == [
        "pretrain-00002-of-00003.tfrecord"
    ]


def test_reuses_matching_data(tmp_path, fake_builders, monkeypatch):
    default_data.prepare_default_data(str(tmp_path), num_shards=2)
    monkeypatch.setattr(
        default_data, "_existing_shards_match", lambda *args: True
    )
    again = default_data.prepare_default_data(str(tmp_path), num_shards=2)
    assert len(fake_builders) == 2  # neither rebuilt
    assert len(again.train_files) == 1


def test_refuses_a_single_shard(tmp_path):
    with pytest.raises(ValueError, match="num_shards must be >= 2"):
        default_data.prepare_default_data(str(tmp_path), num_shards=1)


def write_vocabulary(path, words):
    path.write_text(
        "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n"
    )
    return str(path)


def test_a_given_vocabulary_is_used_not_learned(tmp_path, fake_builders):
    vocab_file = write_vocabulary(tmp_path / "mine.txt", ["the", "a"])
    data = default_data.prepare_default_data(
        str(tmp_path / "work"),
        seq_length=32,
        num_shards=2,
        vocab_file=vocab_file,
    )
    assert fake_builders == [("shards", 2, 32)]  # no vocabulary learned
    assert data.vocab_file == vocab_file
    assert not os.path.exists(tmp_path / "work" / "vocab.txt")
    # Its shards live apart from those of the learned vocabulary.
    assert os.path.basename(data.shard_dir).startswith("shards_32_")
    other = write_vocabulary(tmp_path / "other.txt", ["the", "b"])
    again = default_data.prepare_default_data(
        str(tmp_path / "work"), seq_length=32, num_shards=2, vocab_file=other
    )
    assert again.shard_dir != data.shard_dir


def test_a_given_vocabulary_without_special_tokens_is_refused(
    tmp_path, fake_builders
):
    path = tmp_path / "bad.txt"
    path.write_text("the\na\n")
    with pytest.raises(ValueError, match=r"\[PAD\]"):
        default_data.prepare_default_data(
            str(tmp_path / "work"), num_shards=2, vocab_file=str(path)
        )
    assert fake_builders == []
