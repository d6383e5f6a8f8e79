"""Session fixtures for the training tests: a tiny corpus, vocabularies,
MLM shards built with `data_pipeline`, and a tiny pre-trained preset.

Subprocess helpers run the real scripts (strategies that must configure
devices before TensorFlow starts, `kill -9`, several workers).
"""

import json
import os
import shutil
import socket
import subprocess
import sys

import pytest

from tests.data_pipeline.conftest import shard_config
from tests.sizes import encoder_sizes

REPO = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)
PRETRAIN_SCRIPT = os.path.join(REPO, "scripts", "pretrain.py")
# The GLUE data beside the checkout, where present.
SHARED_GLUE = os.path.join(REPO, "..", "shared", "data", "glue")
FINETUNE_SCRIPT = os.path.join(REPO, "scripts", "finetune_glue.py")
SEQ_LENGTH = 32
SHUFFLE_BUFFER = 256

# Every subprocess pre-training run uses this model: 2 layers, hidden 32.
TINY_MODEL_FLAGS = [
    "--num_layers=2",
    "--num_heads=2",
    "--hidden_dim=32",
    "--intermediate_dim=64",
    "--max_sequence_length=64",
    f"--seq_length={SEQ_LENGTH}",
    "--verbose=2",
    # Graph mode: an XLA compile costs a tiny run more than it saves; the
    # XLA default has tests of its own (test_distribution, the recipe's).
    "--nojit_compile",
    # The default buffer is larger than a test shard: filling it reads the
    # shard several times over before the first step.
    f"--shuffle_buffer={SHUFFLE_BUFFER}",
]


def worker_tf_configs(count):
    """The `TF_CONFIG` (JSON) of each of `count` workers of one cluster,
    on TCP ports of 127.0.0.1 free at the moment of the call."""
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    workers = [f"127.0.0.1:{s.getsockname()[1]}" for s in sockets]
    for s in sockets:
        s.close()
    return [
        json.dumps(
            {
                "cluster": {"worker": workers},
                "task": {"type": "worker", "index": index},
            }
        )
        for index in range(count)
    ]


def subprocess_env(**extra):
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("TF_CONFIG", None)
    if "XLA_FLAGS" in extra:
        # Added to the session's flags (tests/conftest.py), not in their place.
        extra["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} {extra['XLA_FLAGS']}"
    env.update(extra)
    return env


def pretrain_in_process(model_dir, shards, vocab_file, steps):
    """Pre-trains the tiny model `steps` steps into `model_dir`, its one
    checkpoint at the last step."""
    from tupe_tf.training.pretrain import run_pretraining

    config = pretrain_config(
        model_dir, shards, vocab_file, num_train_steps=steps, save_every=steps
    )
    return run_pretraining(config)


def pretrain_flags(data_flags, model_dir, *flags):
    """Flags of the pre-training script: the tiny model, `data_flags`,
    `--model_dir` and `flags`."""
    return TINY_MODEL_FLAGS + data_flags + [f"--model_dir={model_dir}", *flags]


def assert_refused(run, *fragments):
    """A script run refused: one `ERROR:` line holding every fragment, exit 2, no traceback."""
    output = run.stderr[-4000:]
    assert run.returncode == 2, output
    assert "Traceback" not in run.stderr, output
    errors = [
        line for line in run.stderr.splitlines() if line.startswith("ERROR:")
    ]
    assert len(errors) == 1, output
    for fragment in fragments:
        assert fragment in errors[0], errors[0]
    return errors[0]


def run_script(script, args, timeout=240, **env):
    """Runs a script to completion; returns the CompletedProcess."""
    return subprocess.run(
        [sys.executable, script] + list(args),
        env=subprocess_env(**env),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
    )


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("training_data")


@pytest.fixture(scope="session")
def corpus_file(data_dir):
    """~150 KB of the embedded Wikipedia sample, as plain text."""
    import data_pipeline

    with open(data_dir / "full.txt", "w") as out:
        with open(data_pipeline.embedded_corpus_path()) as f:
            out.write(f.read(150_000))
    return str(data_dir / "full.txt")


@pytest.fixture(scope="session")
def vocab_file(data_dir, corpus_file):
    import data_pipeline

    path = str(data_dir / "vocab.txt")
    data_pipeline.build_vocabulary(corpus_file, 400, path, lowercase=True)
    return path


@pytest.fixture(scope="session")
def other_vocab_file(data_dir, corpus_file):
    """A different vocabulary than the one the shards were built with."""
    import data_pipeline

    path = str(data_dir / "other_vocab.txt")
    data_pipeline.build_vocabulary(corpus_file, 300, path, lowercase=True)
    return path


@pytest.fixture(scope="session")
def shards(data_dir, corpus_file, vocab_file):
    """Two dynamic-masking shards of length 32: one to train, one to eval."""
    import data_pipeline

    output_dir = str(data_dir / "shards")
    settings = dict(max_seq_length=SEQ_LENGTH, num_shards=2, lowercase=True)
    config = shard_config(corpus_file, vocab_file, output_dir, **settings)
    data_pipeline.build_shards(config)
    files = sorted(
        os.path.join(output_dir, f)
        for f in os.listdir(output_dir)
        if ".tfrecord" in f
    )
    return {"dir": output_dir, "train": files[0], "eval": files[1]}


@pytest.fixture(scope="session")
def data_flags(shards, vocab_file):
    return [
        f"--train_files={shards['train']}",
        f"--eval_files={shards['eval']}",
        f"--vocab_file={vocab_file}",
    ]


@pytest.fixture(scope="session")
def tiny_preset(data_dir, vocab_file):
    """An untrained tiny TUPE-R masked LM saved as a keras-hub preset."""
    import tupe_tf

    tokenizer = tupe_tf.TupeTokenizer(vocabulary=vocab_file, lowercase=True)
    backbone = tupe_tf.TupeBackbone(
        tokenizer.vocabulary_size(),
        max_sequence_length=64,
        **encoder_sizes(32),
        position_encoding="tupe-r",
        segment_encoding="per-head",
    )
    model = tupe_tf.TupeMaskedLM(
        backbone,
        preprocessor=tupe_tf.TupeMaskedLMPreprocessor(
            tokenizer, sequence_length=SEQ_LENGTH
        ),
    )
    path = str(data_dir / "tiny_preset")
    shutil.rmtree(path, ignore_errors=True)
    model.save_to_preset(path)
    return path


def sst2_config(output_dir, preset, glue_dir, **overrides):
    """A `GlueConfig` fine-tuning `preset` on SST-2 at length 16."""
    from tupe_tf.training import GlueConfig

    return GlueConfig(
        task="sst2",
        preset=preset,
        glue_dir=glue_dir,
        output_dir=str(output_dir),
        seq_length=16,
        **overrides,
    )


def pretrain_config(model_dir, shards, vocab_file, **overrides):
    """A tiny `PretrainConfig` for in-process runs, in graph mode unless
    `jit_compile` says otherwise (as TINY_MODEL_FLAGS)."""
    from tupe_tf.training import config as config_lib

    model_overrides = {
        k: overrides.pop(k)
        for k in list(overrides)
        if k in config_lib.ModelConfig.__dataclass_fields__
    }
    optimizer_overrides = {
        k: overrides.pop(k)
        for k in list(overrides)
        if k in config_lib.OptimizerConfig.__dataclass_fields__
    }
    runtime_overrides = {
        k: overrides.pop(k)
        for k in list(overrides)
        if k in config_lib.RuntimeConfig.__dataclass_fields__
    }
    model = dict(encoder_sizes(32), max_sequence_length=64)
    model.update(model_overrides)
    optimizer = dict(learning_rate=1e-3, warmup_steps=2)
    optimizer.update(optimizer_overrides)
    kwargs = dict(
        model_dir=str(model_dir),
        train_files=[shards["train"]],
        eval_files=[shards["eval"]],
        vocab_file=vocab_file,
        seq_length=SEQ_LENGTH,
        global_batch_size=8,
        num_train_steps=6,
        save_every=3,
        eval_steps=2,
        log_every=2,
        verbose=0,
        shuffle_buffer=SHUFFLE_BUFFER,
        model=config_lib.ModelConfig(**model),
        optimizer=config_lib.OptimizerConfig(**optimizer),
        runtime=config_lib.RuntimeConfig(
            **{"jit_compile": False, **runtime_overrides}
        ),
    )
    kwargs.update(overrides)
    return config_lib.PretrainConfig(**kwargs)
