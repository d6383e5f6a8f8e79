"""A setting that only matters with another one is refused without it."""

import pytest

from data_pipeline.shards import ShardConfig
from data_pipeline.vocab import VocabConfig
from tupe_tf.analysis.study_config import CompareConfig
from tupe_tf.training.config import RuntimeConfig
from tupe_tf.utils.errors import UserError

SHARDS = dict(vocab_file="v.txt", output_dir="out")


@pytest.mark.parametrize(
    "config, message",
    [
        (
            ShardConfig(mask_rate=0.2, **SHARDS),
            r"--mask_rate=0.2 only applies with --static_masking",
        ),
        (
            ShardConfig(max_predictions_per_seq=5, **SHARDS),
            r"--max_predictions_per_seq=5 only applies with --static_masking",
        ),
        (
            ShardConfig(num_partitions=4, **SHARDS),
            r"--num_partitions=4 only applies with --runner",
        ),
        (
            VocabConfig(output_file="v.txt", num_iterations=8),
            r"--num_iterations=8 only applies with --learner=tf_text",
        ),
        (
            VocabConfig(output_file="v.txt", learner="tf_text", max_words=9),
            r"--max_words=9 only applies with --learner=tokenizers",
        ),
        (
            VocabConfig(output_file="v.txt", beam_options="--x=1"),
            r"--beam_options=--x=1 only applies with --runner",
        ),
        (RuntimeConfig(tpu="local"), r"--tpu=local only applies with"),
        (
            RuntimeConfig(num_cpu_devices=2),
            r"--num_cpu_devices=2 only applies with --strategy=mirrored",
        ),
        (
            CompareConfig(from_results=True, max_runs=1),
            r"--max_runs=1 only applies while the study runs",
        ),
    ],
)
def test_settings_that_would_be_ignored_are_refused(config, message):
    with pytest.raises(UserError, match=message):
        config.validate()


@pytest.mark.parametrize(
    "config",
    [
        ShardConfig(static_masking=True, mask_rate=0.2, **SHARDS),
        ShardConfig(
            runner="DirectRunner", num_partitions=4, num_shards=4, **SHARDS
        ),
        VocabConfig(output_file="v.txt", learner="tf_text", num_iterations=8),
        RuntimeConfig(strategy="mirrored", num_cpu_devices=2),
        RuntimeConfig(strategy="tpu", tpu="local"),
        CompareConfig(max_runs=1),
    ],
)
def test_the_same_settings_with_what_they_need_pass(config, tmp_path):
    if isinstance(config, (ShardConfig,)):
        config.output_dir = str(tmp_path / "out")
    config.validate()
