"""The data pipeline's configurations refuse misspelt settings by name."""

import subprocess
import sys

import pytest

from data_pipeline.shards import ShardConfig
from data_pipeline.vocab import VocabConfig


@pytest.mark.parametrize(
    "config_cls, misspelt, meant",
    [
        (ShardConfig, "max_seq_lenght", "max_seq_length"),
        (ShardConfig, "max_unk_fractoin", "max_unk_fraction"),
        (VocabConfig, "vocab_sise", "vocab_size"),
        (VocabConfig, "max_word", "max_words"),
    ],
)
def test_misspelt_setting_names_the_closest_one(config_cls, misspelt, meant):
    with pytest.raises(TypeError, match=f"did you mean `{meant}`"):
        config_cls(**{misspelt: 1})
    assert config_cls(**{meant: getattr(config_cls(), meant)})


@pytest.mark.large
def test_the_configs_and_their_helper_load_no_tensorflow():
    # The scripts check their flags before TensorFlow's slow import.
    code = (
        "import sys, data_pipeline.shards, data_pipeline.vocab;"
        "print('tensorflow' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
