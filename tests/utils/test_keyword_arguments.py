"""The data pipeline's configurations refuse misspelt settings by name."""

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
