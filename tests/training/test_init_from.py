"""`--init_from` (`tupe_tf.training.init_from`): which presets a new run
starts from, what is refused, and the weights and record it starts with.

The two-phase recipe that trains with it is `test_two_phase_recipe.py`.
"""

import json
import os
import shutil

import keras
import keras_hub
import numpy as np
import pytest

import tupe_tf
from data_pipeline.vocab import load_vocabulary
from tests.sizes import encoder_sizes
from tests.training.conftest import pretrain_config
from tupe_tf.training import init_from
from tupe_tf.training import pretrain_model
from tupe_tf.training.pretrain import run_pretraining
from tupe_tf.utils.errors import UserError

# The `tiny_preset` fixture's model.
PRESET_MODEL = dict(segment_encoding="per-head", max_sequence_length=64)


def _vocabulary_size(vocab_file):
    return sum(1 for line in open(vocab_file) if line.strip())


@pytest.fixture(scope="module")
def bert_preset(tmp_path_factory, vocab_file):
    """A keras-hub BertBackbone preset of the tests' dims, length 16."""
    keras.utils.set_random_seed(1)
    bert = keras_hub.models.BertBackbone(
        _vocabulary_size(vocab_file),
        max_sequence_length=16,
        **encoder_sizes(32),
    )
    path = str(tmp_path_factory.mktemp("bert") / "preset")
    bert.save_to_preset(path)
    return path


def _config(tmp_path, shards, vocab_file, source, **overrides):
    return pretrain_config(
        tmp_path / "model", shards, vocab_file, init_from=source, **overrides
    )


def _refused(config, *fragments):
    with pytest.raises(UserError) as refusal:
        run_pretraining(config)
    message = str(refusal.value)
    for fragment in fragments:
        assert fragment in message, message
    assert not os.path.exists(config.model_dir), "--model_dir was written"
    return message


@pytest.mark.parametrize("content", [None, {"class_name": "TupeTokenizer"}])
def test_a_directory_that_is_neither_kind_of_preset_is_refused(
    tmp_path, shards, vocab_file, content
):
    source = tmp_path / "not_a_preset"
    source.mkdir()
    if content is not None:
        (source / "config.json").write_text(json.dumps(content))
    found = "a TupeTokenizer" if content else "no model config.json"
    _refused(
        _config(tmp_path, shards, vocab_file, str(source)),
        f"--init_from='{source}' is neither a tupe-tf preset nor a keras-hub "
        f"BertBackbone preset (it holds {found})",
    )


@pytest.mark.parametrize(
    "overrides, fragment",
    [
        (
            dict(hidden_dim=64, intermediate_dim=64),
            "the preset's hidden_dim is 32, this run's (--model_size, "
            "--hidden_dim) is 64. Pass --hidden_dim=32",
        ),
        (
            dict(num_layers=3),
            "the preset's num_layers is 2, this run's (--model_size, "
            "--num_layers) is 3.",
        ),
        (
            dict(position_encoding="tupe-a"),
            "the preset's position_encoding is 'tupe-r', this run's "
            "(--position_encoding) is 'tupe-a'. Pass --position_encoding="
            "tupe-r (only --dropout, --max_sequence_length",
        ),
        (
            dict(segment_encoding="input"),
            "the preset's segment_encoding is 'per-head', this run's "
            "(--segment_encoding) is 'input'.",
        ),
        (
            dict(max_sequence_length=48),
            "the preset's max_sequence_length is 64, this run's "
            "(--max_sequence_length) is 48. Its position tables can grow, "
            "not shrink",
        ),
    ],
)
def test_a_tupe_tf_preset_that_does_not_fit_is_refused(
    tmp_path, shards, vocab_file, tiny_preset, overrides, fragment
):
    model = dict(PRESET_MODEL, **overrides)
    config = _config(tmp_path, shards, vocab_file, tiny_preset, **model)
    _refused(config, f"--init_from='{tiny_preset}': ", fragment)


def test_a_bert_preset_fits_any_encoding_but_not_other_dims(
    tmp_path, shards, vocab_file, bert_preset
):
    source = init_from.read_source(bert_preset)
    assert source.kind == init_from.BERT and not source.has_head
    for encoding in ("tupe-r", "rope", "bert"):
        config = _config(
            tmp_path,
            shards,
            vocab_file,
            bert_preset,
            position_encoding=encoding,
        )
        init_from.check_fit(source, config.model)
    # A shorter table than BERT's matters only where it is copied.
    short = dict(max_sequence_length=8, seq_length=8)
    init_from.check_fit(
        source,
        _config(tmp_path, shards, vocab_file, bert_preset, **short).model,
    )
    with pytest.raises(UserError, match="max_sequence_length is 16, this"):
        init_from.check_fit(
            source,
            _config(
                tmp_path,
                shards,
                vocab_file,
                bert_preset,
                position_encoding="bert",
                **short,
            ).model,
        )
    _refused(
        _config(tmp_path, shards, vocab_file, bert_preset, num_heads=4),
        "the preset's num_heads is 2, this run's (--model_size, --num_heads) "
        "is 4.",
    )


def test_another_vocabulary_is_refused(
    tmp_path, vocab_file, other_vocab_file, tiny_preset
):
    source = init_from.read_source(tiny_preset)
    size = _vocabulary_size(vocab_file)
    init_from.check_vocabulary(source, load_vocabulary(vocab_file))
    other_size = _vocabulary_size(other_vocab_file)
    with pytest.raises(
        UserError,
        match=rf"vocabulary_size is {size}, this run's "
        rf"\(--vocab_file='.*other_vocab.txt'\) is {other_size}\.",
    ):
        init_from.check_vocabulary(source, load_vocabulary(other_vocab_file))
    # As many tokens, two of them swapped.
    tokens = open(vocab_file).read().split("\n")
    tokens[-3], tokens[-2] = tokens[-2], tokens[-3]
    swapped = tmp_path / "swapped.txt"
    swapped.write_text("\n".join(tokens))
    with pytest.raises(UserError, match="holds other tokens than the preset"):
        init_from.check_vocabulary(source, load_vocabulary(str(swapped)))


def test_a_run_reads_its_vocabulary_and_init_source_once(
    tmp_path, shards, vocab_file, tiny_preset, monkeypatch
):
    from data_pipeline import vocab
    from tupe_tf.training import pretrain
    from tupe_tf.training import pretrain_data

    reads = []
    for module, name in (
        (vocab, "load_vocabulary"),
        (init_from, "read_source"),
    ):
        original = getattr(module, name)

        def counted(path, _original=original):
            reads.append(os.path.abspath(path))
            return _original(path)

        monkeypatch.setattr(module, name, counted)
    config = _config(tmp_path, shards, vocab_file, tiny_preset, **PRESET_MODEL)
    run = pretrain.prepare_run(config)
    train_data, eval_data = pretrain_data.make_input_fns(run)
    train_data(0), eval_data()
    preset = os.path.abspath(tiny_preset)
    asset = os.path.join(preset, init_from.VOCABULARY_ASSET)
    assert sorted(reads) == sorted([preset, os.path.abspath(vocab_file), asset])
    assert run.vocabulary.size == _vocabulary_size(vocab_file)


def _masked_lm(tmp_path, shards, vocab_file, source, **model):
    config = _config(tmp_path, shards, vocab_file, source, **model)
    model = pretrain_model.build_masked_lm(config, _vocabulary_size(vocab_file))
    model(pretrain_model.dummy_batch(config), training=False)
    return model


def _inputs(length, vocabulary_size):
    ids = np.random.default_rng(0).integers(5, vocabulary_size, (2, length))
    return {
        "token_ids": ids.astype("int32"),
        "segment_ids": np.zeros((2, length), "int32"),
        "padding_mask": np.ones((2, length), "int32"),
    }


def test_a_longer_run_from_a_tupe_tf_preset_starts_with_its_weights(
    tmp_path, shards, vocab_file, tiny_preset
):
    model = _masked_lm(
        tmp_path,
        shards,
        vocab_file,
        tiny_preset,
        **dict(PRESET_MODEL, max_sequence_length=128, dropout=0.0),
    )
    record = init_from.initialize(model, init_from.read_source(tiny_preset))
    assert record == {
        "preset": tiny_preset,
        "kind": "tupe-tf",
        "position_encoding": "tupe-r",
        "max_sequence_length": 64,
        # Its preprocessor's length: rows 32 to 63 were never trained.
        "trained_length": 32,
        "grown_tables": {"untied_position_bias/position_embeddings": [32, 128]},
        "new_variables": [],
    }
    trained = tupe_tf.TupeMaskedLM.from_preset(tiny_preset, preprocessor=None)
    inputs = _inputs(16, _vocabulary_size(vocab_file))
    inputs["mask_positions"] = np.array([[1, 2], [3, 4]], "int32")
    np.testing.assert_allclose(
        model(inputs, training=False),
        trained(inputs, training=False),
        atol=1e-5,
    )


def test_a_bert_preset_warm_starts_any_encoding(
    tmp_path, shards, vocab_file, bert_preset
):
    source = init_from.read_source(bert_preset)
    bert = keras_hub.models.BertBackbone.from_preset(bert_preset)
    vocabulary_size = _vocabulary_size(vocab_file)
    # `bert` at a longer length: BERT's table grows, BERT's outputs at its
    # own lengths; only the masked-LM head is new.
    model = _masked_lm(
        tmp_path,
        shards,
        vocab_file,
        bert_preset,
        position_encoding="bert",
        dropout=0.0,
    )
    record = init_from.initialize(model, source)
    assert record["kind"] == "keras-hub BertBackbone"
    assert record["grown_tables"] == {"position_embedding/embeddings": [16, 64]}
    assert record["new_variables"] and all(
        path.startswith("mlm_head/") for path in record["new_variables"]
    )
    inputs = _inputs(16, vocabulary_size)
    np.testing.assert_allclose(
        model.backbone(inputs)["sequence_output"],
        bert(inputs)["sequence_output"],
        atol=1e-5,
    )
    # tupe-r: its positional parameters start as a fresh model's.
    model = _masked_lm(tmp_path, shards, vocab_file, bert_preset)
    record = init_from.initialize(model, source)
    assert record["grown_tables"] == {}
    assert "untied_position_bias/position_embeddings" in record["new_variables"]
    np.testing.assert_array_equal(
        model.backbone.token_embedding.embeddings.numpy(),
        bert.token_embedding.embeddings.numpy(),
    )


def test_a_preset_without_its_head_starts_a_fresh_head(
    tmp_path, shards, vocab_file, tiny_preset
):
    backbone_only = str(tmp_path / "backbone_only")
    shutil.copytree(tiny_preset, backbone_only)
    (tmp_path / "backbone_only" / "task.json").unlink()
    source = init_from.read_source(backbone_only)
    assert source.kind == init_from.TUPE_TF and not source.has_head
    model = _masked_lm(
        tmp_path, shards, vocab_file, backbone_only, **PRESET_MODEL
    )
    record = init_from.initialize(model, source)
    backbone = {v.path for v in model.backbone.weights}
    head = {v.path for v in model.masked_lm_head.weights} - backbone
    assert head and record["new_variables"] == sorted(head)
