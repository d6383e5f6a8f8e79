"""GLUE fine-tuning: `run_glue` on tiny official-layout fixtures."""

import json
import os
import shutil

import numpy as np
import pytest

from tests.converted_preset import DICTIONARY as CONVERTED_DICTIONARY
from tests.converted_preset import FIXTURES as CONVERTED_FIXTURES
from tests.converted_preset import PAD_ID as CONVERTED_PAD_ID
from tests.converted_preset import WORDS as CONVERTED_WORDS
from tests.converted_preset import converted_preset
from tests.training.conftest import FINETUNE_SCRIPT
from tests.training.conftest import SHARED_GLUE
from tests.training.conftest import run_script
from tests.training.conftest import sst2_config
from tupe_tf.training import GlueConfig
from tupe_tf.training import RuntimeConfig
from tupe_tf.training.config import PAPER_FINETUNE_OPTIMIZER
from tupe_tf.training.finetune import _features
from tupe_tf.training.finetune import run_glue
from tupe_tf.training.finetune import summarize_runs

CONVERTED_CHECKPOINT = os.path.join(CONVERTED_FIXTURES, "tupe-r_fp32_zip.pt")
# One learning rate, one seed, one epoch.
# Graph mode: one epoch of a tiny model is shorter than its XLA compile; the
# sentiment tests fine-tune under the default (XLA).
ONE_SHORT_RUN = dict(
    learning_rates=[1e-3],
    seeds=[0],
    num_epochs=1,
    verbose=0,
    runtime=RuntimeConfig(jit_compile=False),
)


@pytest.fixture(scope="module")
def pair_glue_dir(tmp_path_factory):
    """A learnable MRPC-layout task: paraphrase iff both sentences share a topic."""
    root = tmp_path_factory.mktemp("glue")
    (root / "MRPC").mkdir()
    topics = [
        "the history of the city",
        "music and art",
        "the war in europe",
        "a new school",
    ]
    rng = np.random.default_rng(0)
    for split, n in (("train", 96), ("dev", 32)):
        lines = ["Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"]
        for i in range(n):
            a = int(rng.integers(len(topics)))
            label = i % 2
            b = (
                a
                if label
                else (a + 1 + int(rng.integers(len(topics) - 1))) % len(topics)
            )
            lines.append(
                f"{label}\t{i}\t{i}\t{topics[a]} .\t{topics[b]} again ."
            )
        (root / "MRPC" / f"{split}.tsv").write_text("\n".join(lines) + "\n")
    return str(root)


def _mrpc_pairs(preset, glue_dir, num_examples, sequence_length):
    """The first `num_examples` MRPC validation pairs of `glue_dir` and
    `preset`'s preprocessor packing them to `sequence_length`."""
    import tupe_tf
    from data_pipeline import glue

    split = glue.load_glue(
        "mrpc", "validation", glue_dir=glue_dir, max_examples=num_examples
    )
    preprocessor = tupe_tf.TupeTextClassifierPreprocessor(
        tupe_tf.TupeTokenizer.from_preset(preset),
        sequence_length=sequence_length,
    )
    return split, preprocessor


def test_sentence_pairs_get_segment_ids(tiny_preset, pair_glue_dir):
    split, preprocessor = _mrpc_pairs(tiny_preset, pair_glue_dir, 4, 32)
    features, labels = next(iter(_features(split, preprocessor, 4, False, 0)))
    segment_ids = features["segment_ids"].numpy()
    token_ids = features["token_ids"].numpy()
    sep = preprocessor.tokenizer.sep_token_id
    for row, segments in zip(token_ids, segment_ids):
        first_sep = int(np.argmax(row == sep))
        assert set(segments[: first_sep + 1]) == {0}
        assert segments[first_sep + 1] == 1  # the second sentence is segment 1
    np.testing.assert_array_equal(labels.numpy(), split.labels)


def test_features_run_without_autotuning(tiny_preset, pair_glue_dir):
    # tf.data's autotuning model put whole fine-tuning runs at 205 ms per
    # step (docs/benchmarks.md); the fine-tuning input keeps it off.
    split, preprocessor = _mrpc_pairs(tiny_preset, pair_glue_dir, 4, 32)
    dataset = _features(split, preprocessor, 2, True, 0)
    assert dataset.options().autotune.enabled is False
    assert sum(1 for _ in dataset) == 2


def test_pad_to_longest_keeps_the_outputs(tiny_preset, pair_glue_dir):
    import tupe_tf
    from tupe_tf.training.finetune import PAD_MULTIPLE

    split, preprocessor = _mrpc_pairs(tiny_preset, pair_glue_dir, 8, 64)
    full, _ = next(iter(_features(split, preprocessor, 8, False, 0)))
    trimmed, _ = next(
        iter(_features(split, preprocessor, 8, False, 0, pad_to_longest=True))
    )
    longest = int(full["padding_mask"].numpy().sum(axis=1).max())
    width = trimmed["token_ids"].shape[1]
    assert width % PAD_MULTIPLE == 0 and longest <= width < 64
    assert longest > width - PAD_MULTIPLE
    for name, value in full.items():
        np.testing.assert_array_equal(trimmed[name], value[:, :width])
        assert not value.numpy()[:, width:].any()  # only padding was cut
    backbone = tupe_tf.TupeBackbone.from_preset(tiny_preset)
    outputs_full = backbone(full)["pooled_output"]
    outputs_trimmed = backbone(trimmed)["pooled_output"]
    np.testing.assert_allclose(outputs_trimmed, outputs_full, atol=1e-5)


def test_pad_to_longest_is_refused_on_tpu(tmp_path, tiny_preset, pair_glue_dir):
    from tupe_tf.training.finetune import validate_glue_config
    from tupe_tf.utils.errors import UserError

    config = GlueConfig(
        task="mrpc",
        preset=tiny_preset,
        glue_dir=pair_glue_dir,
        output_dir=str(tmp_path / "glue"),
        seq_length=32,
        pad_to_longest=True,
        runtime=RuntimeConfig(strategy="tpu"),
    )
    with pytest.raises(UserError, match=r"--pad_to_longest .* --strategy=tpu"):
        validate_glue_config(config)
    assert not (tmp_path / "glue").exists()  # refused before any output


@pytest.fixture(scope="module")
def sentiment_glue_dir(tmp_path_factory):
    """A learnable SST-2-layout task: the label is the adjective's polarity."""
    root = tmp_path_factory.mktemp("glue_sst2")
    (root / "SST-2").mkdir()
    good = ["a great film", "the best music", "a fine story"]
    bad = ["a bad film", "the worst music", "a poor story"]
    rng = np.random.default_rng(0)
    for split, n in (("train", 256), ("dev", 32)):
        lines = ["sentence\tlabel"]
        for i in range(n):
            label = i % 2
            lines.append(
                f"{(good if label else bad)[int(rng.integers(3))]} about the city\t{label}"
            )
        (root / "SST-2" / f"{split}.tsv").write_text("\n".join(lines) + "\n")
    return str(root)


def _sentiment_config(output_dir, preset, glue_dir, **overrides):
    """A 5-epoch SST-2 run on the tiny learnable sentiment fixture."""
    settings = dict(seeds=[0], batch_size=16, num_epochs=5, verbose=0)
    return sst2_config(output_dir, preset, glue_dir, **settings, **overrides)


@pytest.mark.large
def test_run_glue_learns_and_writes_json(
    tmp_path, tiny_preset, sentiment_glue_dir
):
    results = run_glue(
        _sentiment_config(
            tmp_path,
            tiny_preset,
            sentiment_glue_dir,
            learning_rates=[5e-3, 1e-5],
        )
    )
    saved = json.loads((tmp_path / "sst2" / "results.json").read_text())
    assert (
        saved["chosen_learning_rate"] == results["chosen_learning_rate"] == 5e-3
    )
    # 10% of each class of the 256 training rows held out to choose on.
    assert saved["selection_split"] == {
        "fraction": 0.1,
        "seed": 0,
        "stratified_by": "label",
        "num_fit_examples": 230,
        "num_selection_examples": 26,
    }
    assert len(saved["runs"]) == 2
    assert len(saved["runs"][0]["selection_per_epoch"]) == 5
    fast, slow = saved["runs"]
    assert fast["train_loss"][-1] < fast["train_loss"][0] - 0.2, fast[
        "train_loss"
    ]
    # The evaluation file is scored for the chosen rate's run only.
    assert fast["evaluation"]["validation"]["accuracy"] > 0.8
    assert "evaluation" not in slow
    assert saved["evaluation"] == fast["evaluation"]
    assert saved["recipe"]["warmup_ratio"] == 0.06
    medians = saved["selection_median_by_learning_rate"]
    assert medians["0.005"]["accuracy"] > medians["1e-05"]["accuracy"]
    assert saved["evaluation_sources"]["validation"].endswith("SST-2/dev.tsv")


def test_training_sees_only_the_fit_rows(
    tmp_path, tiny_preset, sentiment_glue_dir
):
    from tupe_tf.training.finetune import _run_datasets
    from tupe_tf.training.finetune import prepare_glue
    from tupe_tf.training.finetune import preset_preprocessor

    config = _sentiment_config(tmp_path, tiny_preset, sentiment_glue_dir)
    prepared = prepare_glue(config)
    # The fixture's sentences repeat: test_glue_selection.py checks the
    # carve's rows; here, that the runs train on the fit part alone.
    assert (len(prepared.fit), len(prepared.selection)) == (230, 26)
    train_ds, selection_ds, eval_sets, steps = _run_datasets(
        config, prepared, preset_preprocessor(tiny_preset, 16), 0
    )
    trained = np.concatenate([labels.numpy() for _, labels in train_ds])
    assert len(trained) == 230 and steps == 15  # ceil(230 / 16)
    np.testing.assert_array_equal(
        np.concatenate([labels.numpy() for _, labels in selection_ds]),
        prepared.selection.labels,
    )
    # The evaluation batches carry no labels (zeros): only the scoring
    # after the choice reads them.
    (evaluation,) = eval_sets.values()
    assert not np.concatenate(
        [labels.numpy() for _, labels in evaluation]
    ).any()


@pytest.mark.large
@pytest.mark.parametrize(
    "runtime",
    [
        # Orthogonal settings share a run.
        RuntimeConfig(mixed_precision="mixed_bfloat16", steps_per_execution=3),
        RuntimeConfig(mixed_precision="mixed_float16"),
    ],
    ids=["mixed_bfloat16_steps_per_execution_3", "mixed_float16"],
)
def test_runtime_settings_fine_tune_and_learn(
    tmp_path, tiny_preset, sentiment_glue_dir, runtime
):
    import keras

    before = keras.config.dtype_policy().name
    results = run_glue(
        _sentiment_config(
            tmp_path,
            tiny_preset,
            sentiment_glue_dir,
            learning_rates=[5e-3],
            runtime=runtime,
        )
    )
    run = results["runs"][0]
    policy = runtime.mixed_precision
    assert run["compute_dtype"] == (
        "float32" if policy == "float32" else policy.split("_")[1]
    )
    assert results["recipe"]["mixed_precision"] == policy
    assert len(run["selection_per_epoch"]) == 5
    assert np.all(np.isfinite(run["train_loss"]))
    assert run["train_loss"][-1] < run["train_loss"][0] - 0.2, run["train_loss"]
    assert run["evaluation"]["validation"]["accuracy"] > 0.8
    # The global policy is restored for whatever runs next.
    assert keras.config.dtype_policy().name == before


def test_medians_over_seeds_and_chosen_learning_rate():
    def run(lr, f1, accuracy):
        return {
            "learning_rate": lr,
            "selection": {"accuracy": accuracy, "f1": f1},
        }

    runs = [
        run(2e-5, 0.70, 0.60),
        run(2e-5, 0.90, 0.70),
        run(2e-5, 0.80, 0.95),
        run(3e-5, 0.85, 0.50),
        run(3e-5, 0.20, 0.99),
        run(3e-5, 0.86, 0.98),
    ]
    by_lr, best = summarize_runs("mrpc", runs)
    assert by_lr["2e-05"] == {"accuracy": 0.70, "f1": 0.80}
    assert by_lr["3e-05"] == {"accuracy": 0.98, "f1": 0.85}
    assert best == 3e-5  # MRPC picks by median F1 (0.85 > 0.80)
    assert summarize_runs("sst2", runs)[1] == 3e-5  # accuracy 0.98 > 0.70
    three = [run(2e-5, 0.0, 0.9), run(3e-5, 0.0, 0.1)]
    assert summarize_runs("rte", three)[1] == 2e-5


@pytest.mark.large
def test_bad_preset_and_seq_length_are_refused(
    tmp_path, tiny_preset, pair_glue_dir
):
    run = run_script(
        FINETUNE_SCRIPT,
        [
            "--task=mrpc",
            f"--preset={tmp_path}",
            f"--glue_dir={pair_glue_dir}",
            f"--output_dir={tmp_path}",
        ],
    )
    assert run.returncode == 2
    assert "is not a keras-hub preset directory (no config.json)" in run.stderr
    with pytest.raises(
        ValueError,
        match=r"--seq_length=128 is above the preset's max_sequence_length=64",
    ):
        run_glue(
            GlueConfig(
                task="mrpc",
                preset=tiny_preset,
                glue_dir=pair_glue_dir,
                seq_length=128,
            )
        )
    # The runtime flags are checked as in pre-training (shared RuntimeConfig).
    with pytest.raises(
        ValueError,
        match=r"--steps_per_execution=2 is not supported with --strategy=mirrored",
    ):
        run_glue(
            GlueConfig(
                task="mrpc",
                preset=tiny_preset,
                glue_dir=pair_glue_dir,
                output_dir=str(tmp_path),
                runtime=RuntimeConfig(
                    strategy="mirrored", steps_per_execution=2
                ),
            )
        )


def test_recipe_defaults_come_from_the_preset_size(tmp_path, tiny_preset):
    from tupe_tf.training.finetune import validate_glue_config

    config = GlueConfig(task="sst2", preset=tiny_preset, seq_length=16)
    validate_glue_config(config)  # hidden size 32: the small-model recipe
    assert config.learning_rates == [1e-3] and config.num_epochs == 3
    base_like = tmp_path / "preset"
    shutil.copytree(tiny_preset, base_like)
    saved = json.loads((base_like / "config.json").read_text())
    saved["config"]["hidden_dim"] = 768
    (base_like / "config.json").write_text(json.dumps(saved))
    config = GlueConfig(
        task="sst2", preset=str(base_like), seq_length=16, num_epochs=2
    )
    validate_glue_config(config)
    assert config.learning_rates == [2e-5, 3e-5, 4e-5, 5e-5]
    assert config.num_epochs == 2  # given: kept
    assert config.recipe == "tupe_paper"


@pytest.mark.parametrize(
    "task, epochs", [("qnli", 5), ("mnli", 5), ("rte", 10)]
)
def test_paper_recipe_on_request_with_their_epochs_per_task(
    tmp_path, tiny_preset, task, epochs
):
    from tupe_tf.training.finetune import validate_glue_config

    config = GlueConfig(
        task=task,
        preset=tiny_preset,
        seq_length=16,
        recipe="tupe_paper",
        output_dir=str(tmp_path),
    )
    validate_glue_config(config)  # hidden size 32, the paper's all the same
    assert config.learning_rates == [2e-5, 3e-5, 4e-5, 5e-5]
    assert config.num_epochs == epochs
    assert (config.batch_size, len(config.seeds)) == (32, 5)
    optimizer = config.optimizer
    assert (optimizer.warmup_ratio, optimizer.weight_decay) == (0.06, 0.01)
    assert (optimizer.beta_1, optimizer.beta_2, optimizer.epsilon) == (
        0.9,
        0.999,
        1e-6,
    )


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """The authors' fixture checkpoint converted with BPE codes."""
    pytest.importorskip("torch")
    pytest.importorskip("sacremoses")
    return converted_preset(str(tmp_path_factory.mktemp("converted")))


@pytest.fixture(scope="module")
def their_words_glue_dir(tmp_path_factory):
    """An MRPC-layout task in words of the converted preset's dictionary."""
    root = tmp_path_factory.mktemp("glue_their_words")
    (root / "MRPC").mkdir()
    lines = ["Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"]
    for i in range(12):
        first = " ".join(CONVERTED_WORDS[j % 14] for j in range(i, i + 4))
        lines.append(f"{i % 2}\t{i}\t{i}\t{first} .\tHe was at the {i % 3}")
    for split in ("train", "dev"):
        (root / "MRPC" / f"{split}.tsv").write_text("\n".join(lines) + "\n")
    return str(root)


def test_converted_preset_packs_as_their_fine_tuning(
    converted, their_words_glue_dir
):
    import tupe_tf
    from data_pipeline import glue
    from tupe_tf.models.fairseq.fairseq_dictionary import (
        read_fairseq_dictionary,
    )
    from tupe_tf.training.finetune import preset_preprocessor

    preprocessor = preset_preprocessor(converted, 24)
    assert isinstance(
        preprocessor, tupe_tf.TupeFairseqTextClassifierPreprocessor
    )
    split = glue.load_glue("mrpc", "train", glue_dir=their_words_glue_dir)
    features, _ = next(iter(_features(split, preprocessor, 2, False, 0)))
    ids = read_fairseq_dictionary(CONVERTED_DICTIONARY).index
    first = [ids(w) for w in split.sentences[0][0].split()]
    # Lowercased; "0" is not in the dictionary (<unk>=3).
    second = [ids(w) for w in "he was at the".split()] + [3]
    packed = [0, *first, 2, 2, *second, 2]
    expected = packed + [CONVERTED_PAD_ID] * (24 - len(packed))
    assert features["token_ids"].numpy()[0].tolist() == expected
    assert features["padding_mask"].numpy()[0].tolist() == [
        i < len(packed) for i in range(24)
    ]


def test_converted_preset_without_bpe_codes_is_refused(
    tmp_path, their_words_glue_dir
):
    pytest.importorskip("torch")
    from tupe_tf.convert.convert_checkpoint import convert_fairseq_checkpoint
    from tupe_tf.utils.errors import UserError

    preset = str(tmp_path / "preset")
    convert_fairseq_checkpoint(
        CONVERTED_CHECKPOINT, CONVERTED_DICTIONARY, preset
    )
    config = GlueConfig(
        task="mrpc",
        preset=preset,
        glue_dir=their_words_glue_dir,
        output_dir=str(tmp_path / "out"),
        seq_length=16,
    )
    with pytest.raises(UserError, match=r"no tokenizer .*--bpe_codes"):
        run_glue(config)
    assert not (tmp_path / "out" / "mrpc" / "results.json").exists()


@pytest.mark.large
def test_script_fine_tunes_a_converted_preset_with_their_recipe(
    tmp_path, converted, their_words_glue_dir
):
    run = run_script(
        FINETUNE_SCRIPT,
        [
            "--task=mrpc",
            f"--preset={converted}",
            f"--glue_dir={their_words_glue_dir}",
            f"--output_dir={tmp_path}",
            "--recipe=tupe_paper",
            "--learning_rates=5e-5",
            "--seeds=0",
            "--num_epochs=1",
            "--batch_size=4",
            "--seq_length=24",
            "--nojit_compile",
        ],
    )
    assert run.returncode == 0, run.stderr[-3000:]
    results = json.loads((tmp_path / "mrpc" / "results.json").read_text())
    assert results["recipe"] == {
        "name": "tupe_paper",
        "batch_size": 4,
        "num_epochs": 1,
        **PAPER_FINETUNE_OPTIMIZER,
        "seq_length": 24,
        "learning_rates": [5e-5],
        "seeds": [0],
        "mixed_precision": "float32",
    }
    (only,) = results["runs"]
    assert len(only["train_loss"]) == 1 and np.isfinite(only["train_loss"][0])
    assert set(only["selection"]) == {"accuracy", "f1"}
    assert set(only["evaluation"]["validation"]) == {"accuracy", "f1"}


@pytest.mark.large
@pytest.mark.skipif(
    not os.path.isdir(SHARED_GLUE), reason="../shared/data/glue absent"
)
def test_cola_from_shared_glue_reports_matthews(tmp_path, tiny_preset):
    results = run_glue(
        GlueConfig(
            task="cola",
            preset=tiny_preset,
            glue_dir=SHARED_GLUE,
            output_dir=str(tmp_path),
            seq_length=32,
            batch_size=32,
            max_train_examples=256,
            max_eval_examples=128,
            **ONE_SHORT_RUN,
        )
    )
    assert results["num_train_examples"] == 256
    assert results["selection_split"]["num_selection_examples"] == 26
    assert (
        -1.0 <= results["evaluation"]["validation"]["matthews_corrcoef"] <= 1.0
    )
    assert results["evaluation_names"]["validation"].endswith("first 128 rows")


@pytest.mark.large
def test_regression_and_three_way_tasks_run(tmp_path, tiny_preset):
    """STS-B (regression head, Pearson/Spearman) and MNLI (3 classes, matched
    and mismatched dev) end to end on tiny fixtures."""
    root = tmp_path / "glue"
    (root / "STS-B").mkdir(parents=True)
    (root / "MNLI").mkdir()
    header = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore"
    rows = [
        f"{i}\tm\tf\t2012\t{i}\tn\tn\tthe city {i} .\tthe music {i % 3} .\t{i % 5}.0"
        for i in range(24)
    ]
    for name in ("train", "dev"):
        (root / "STS-B" / f"{name}.tsv").write_text(
            "\n".join([header] + rows) + "\n"
        )
    header = "index\tpromptID\tpairID\tgenre\ts1b\ts2b\ts1p\ts2p\tsentence1\tsentence2\tlabel1\tgold_label"
    labels = ["entailment", "neutral", "contradiction"]
    rows = [
        f"{i}\t1\t1\tg\t(a)\t(b)\t(A)\t(B)\tthe war {i} .\ta school .\tx\t{labels[i % 3]}"
        for i in range(24)
    ]
    for name in ("train", "dev_matched", "dev_mismatched"):
        (root / "MNLI" / f"{name}.tsv").write_text(
            "\n".join([header] + rows) + "\n"
        )
    for task, expected in (
        ("stsb", {"validation": {"pearson", "spearman"}}),
        (
            "mnli",
            {
                "validation_matched": {"accuracy"},
                "validation_mismatched": {"accuracy"},
            },
        ),
    ):
        results = run_glue(
            GlueConfig(
                task=task,
                preset=tiny_preset,
                glue_dir=str(root),
                output_dir=str(tmp_path / "out"),
                seq_length=16,
                batch_size=8,
                **ONE_SHORT_RUN,
            )
        )
        assert {k: set(v) for k, v in results["evaluation"].items()} == expected
        for split in results["evaluation"].values():
            for value in split.values():
                assert np.isfinite(value)
