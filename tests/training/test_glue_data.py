"""`data_pipeline.glue`: official-layout TSV reading for all nine tasks."""

import os

import numpy as np
import pytest

from data_pipeline import glue
from tests.training.conftest import SHARED_GLUE
from tupe_tf.utils.errors import UserError

# Two rows per file, in each task's official layout.
FIXTURES = {
    "CoLA/train.tsv": "gj04\t1\t\tthe cat sat .\ngj04\t0\t*\tcat the sat .\n",
    "SST-2/train.tsv": "sentence\tlabel\na fine film \t1\na dull film \t0\n",
    "MRPC/train.tsv": (
        "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
        '1\t1\t2\tHe said "yes" .\tHe agreed .\n0\t3\t4\tIt rained .\tIt was sunny .\n'
    ),
    "STS-B/train.tsv": (
        "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
        "0\tmain\tf\t2012\t1\tnone\tnone\tA man plays .\tA man is playing .\t4.750\n"
        "1\tmain\tf\t2012\t2\tnone\tnone\tA cat .\tA car .\t0.500\n"
    ),
    "QQP/train.tsv": (
        "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n"
        "0\t1\t2\tHow old ?\tWhat age ?\t1\n1\t3\t4\tWhy ?\tWhere ?\t0\n"
    ),
    "MNLI/train.tsv": (
        "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\t"
        "sentence1_parse\tsentence2_parse\tsentence1\tsentence2\tlabel1\tgold_label\n"
        "0\t1\t1e\tgov\t(a)\t(b)\t(A)\t(B)\tIt is red .\tIt has a colour .\tentailment\tentailment\n"
        "1\t2\t2n\tgov\t(a)\t(b)\t(A)\t(B)\tIt is red .\tIt is blue .\tcontradiction\tcontradiction\n"
    ),
    "QNLI/train.tsv": (
        "index\tquestion\tsentence\tlabel\n"
        "0\tWho ?\tHe did .\tentailment\n1\tWhen ?\tBlue .\tnot_entailment\n"
    ),
    "RTE/train.tsv": (
        "index\tsentence1\tsentence2\tlabel\n"
        "0\tA b .\tA .\tentailment\n1\tC d .\tE .\tnot_entailment\n"
    ),
    "WNLI/train.tsv": (
        "index\tsentence1\tsentence2\tlabel\n0\tI x .\tI y .\t1\n1\tI z .\tI w .\t0\n"
    ),
}
FIXTURES["MNLI/dev_matched.tsv"] = FIXTURES["MNLI/train.tsv"]
FIXTURES["MNLI/dev_mismatched.tsv"] = FIXTURES["MNLI/train.tsv"].replace(
    "gov", "fiction"
)

EXPECTED = {
    "cola": ([["the cat sat .", "cat the sat ."]], [1, 0]),
    "sst2": ([["a fine film ", "a dull film "]], [1, 0]),
    "mrpc": (
        [['He said "yes" .', "It rained ."], ["He agreed .", "It was sunny ."]],
        [1, 0],
    ),
    "stsb": (
        [["A man plays .", "A cat ."], ["A man is playing .", "A car ."]],
        [4.75, 0.5],
    ),
    "qqp": ([["How old ?", "Why ?"], ["What age ?", "Where ?"]], [1, 0]),
    "mnli": (
        [["It is red .", "It is red ."], ["It has a colour .", "It is blue ."]],
        [0, 2],
    ),
    "qnli": ([["Who ?", "When ?"], ["He did .", "Blue ."]], [0, 1]),
    "rte": ([["A b .", "C d ."], ["A .", "E ."]], [0, 1]),
    "wnli": ([["I x .", "I z ."], ["I y .", "I w ."]], [1, 0]),
}


@pytest.fixture
def glue_dir(tmp_path):
    for name, text in FIXTURES.items():
        path = tmp_path / name
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    return str(tmp_path)


@pytest.mark.parametrize("task", sorted(EXPECTED))
def test_reads_every_task_with_tfds_label_ids(glue_dir, task):
    split = glue.load_glue(task, "train", glue_dir=glue_dir)
    sentences, labels = EXPECTED[task]
    assert [list(s) for s in split.sentences] == sentences
    np.testing.assert_allclose(split.labels, labels)
    assert split.labels.dtype == (np.float32 if task == "stsb" else np.int32)
    assert len(glue.get_task(task).tfds_features) == len(sentences)


def test_mnli_has_matched_and_mismatched_dev(glue_dir):
    task = glue.get_task("mnli")
    assert task.eval_splits == ("validation_matched", "validation_mismatched")
    mismatched = glue.load_glue(
        "mnli", "validation_mismatched", glue_dir=glue_dir
    )
    assert mismatched.source.endswith("dev_mismatched.tsv")
    assert (
        glue.load_glue("mnli", "validation", glue_dir=glue_dir).split
        == "validation_matched"
    )


def test_missing_file_is_named(glue_dir):
    with pytest.raises(FileNotFoundError, match=r"SST-2/dev\.tsv"):
        glue.load_glue("sst2", "validation", glue_dir=glue_dir)


@pytest.mark.parametrize(
    "task, directory, rows, match",
    [
        (
            "rte",
            "RTE",
            "index\tsentence1\tlabel\n0\ta\tentailment\n",
            r"RTE/train\.tsv: no column 'sentence2'",
        ),
        (
            "qnli",
            "QNLI",
            "index\tquestion\tsentence\tlabel\n0\ta\tb\tentailment\n1\tc\td\tmaybe\n",
            r"QNLI/train\.tsv:3: label column 'label' holds 'maybe'",
        ),
        (
            "sst2",
            "SST-2",
            "sentence\tlabel\nok\t1\nbroken\n",
            r"SST-2/train\.tsv:3: 1 tab-separated columns",
        ),
    ],
    ids=["missing_column", "bad_label", "short_row"],
)
def test_bad_train_file_names_file_and_line(
    tmp_path, task, directory, rows, match
):
    (tmp_path / directory).mkdir()
    (tmp_path / directory / "train.tsv").write_text(rows)
    with pytest.raises(ValueError, match=match):
        glue.load_glue(task, "train", glue_dir=str(tmp_path))


def test_unknown_task_and_split_are_refused(glue_dir):
    with pytest.raises(ValueError, match="--task='squad'"):
        glue.get_task("squad")
    with pytest.raises(ValueError, match="no split 'test'"):
        glue.load_glue("cola", "test", glue_dir=glue_dir)
    assert glue.get_task("SST-2").name == "sst2"


def test_max_examples(glue_dir):
    assert (
        len(glue.load_glue("qqp", "train", glue_dir=glue_dir, max_examples=1))
        == 1
    )


@pytest.mark.skipif(
    not os.path.isdir(SHARED_GLUE), reason="../shared/data/glue absent"
)
def test_shared_cola_and_sst2():
    cola = glue.load_glue("cola", "validation", glue_dir=SHARED_GLUE)
    sst2 = glue.load_glue("sst2", "train", glue_dir=SHARED_GLUE)
    assert len(cola) > 100 and set(np.unique(cola.labels)) == {0, 1}
    assert len(sst2) > 100 and set(np.unique(sst2.labels)) == {0, 1}


@pytest.mark.parametrize("task", ["cola", "stsb", "mnli"])
def test_tfds_path_with_mocked_data(task):
    tfds = pytest.importorskip("tensorflow_datasets")
    with tfds.testing.mock_data(num_examples=6):
        split_name = "validation_mismatched" if task == "mnli" else "train"
        split = glue.load_glue(task, split_name, max_examples=4)
    assert len(split) == 4
    assert split.source == f"tfds:glue/{task}"
    assert len(split.sentences) == (1 if task == "cola" else 2)
    assert all(isinstance(s, str) for s in split.sentences[0])
    if task == "stsb":
        assert split.labels.dtype == np.float32
    else:
        assert split.labels.dtype == np.int32
        assert (
            split.labels.min() >= 0
            and split.labels.max() < glue.get_task(task).num_classes
        )


def test_tfds_without_data_or_network_names_the_flags(monkeypatch, tmp_path):
    tfds = pytest.importorskip("tensorflow_datasets")

    def no_network(*args, **kwargs):
        raise tfds.download.DownloadError("no network")

    monkeypatch.setattr(tfds, "load", no_network)
    with pytest.raises(UserError, match="--tfds_data_dir=.*--glue_dir"):
        glue.load_glue("cola", "train", tfds_data_dir=str(tmp_path))
