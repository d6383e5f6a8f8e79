"""TF-Text pre-training data pipeline: vocabulary, packed MLM shards, reader.

It builds on `tupe_tf.utils`, so importing it runs `tupe_tf/__init__.py`,
which loads the models, Keras and TensorFlow.
"""

from data_pipeline.corpus import embedded_corpus_path
from data_pipeline.corpus import resolve_input_files
from data_pipeline.manifest import read_manifest
from data_pipeline.reader import pretraining_dataset
from data_pipeline.shard_config import ShardConfig
from data_pipeline.shard_verification import ShardCheck
from data_pipeline.shard_verification import check_shards_vocabulary
from data_pipeline.shard_verification import verify_shards
from data_pipeline.shards import build_shards
from data_pipeline.vocab import RESERVED_TOKENS
from data_pipeline.vocab import build_vocabulary
from data_pipeline.vocab import load_vocabulary
