"""The data scripts' refusals of settings and files, in-process: the
functions `scripts/build_shards.py` and `scripts/build_vocab.py` call, from
flags parsed as the scripts parse them, raise one `UserError` whose line
(`cli.fail`'s) names the flag or file, and nothing is written.

What only a process shows (absl's refusals of a flag, exit code 2, the
`ERROR:` line on stderr after TensorFlow's start-up log) is tested through
the scripts in test_script_errors.py. docs/errors.md lists the cases.
"""

import os

import pytest
from absl import flags

from data_pipeline import beam_vocab
from data_pipeline import shards as shards_lib
from data_pipeline import vocab as vocab_lib
from tests.data_pipeline import conftest
from tupe_tf.utils import cli
from tupe_tf.utils import config_flags
from tupe_tf.utils.errors import UserError

# build_shards.py's refusals before it reads the corpus: (flags, start of
# the error line).
SHARD_CASES = {
    "missing input": (
        {"input": "{dir}/gone.txt"},
        "ERROR: --input: file '{dir}/gone.txt' not found.",
    ),
    "empty glob": (
        {"input": "{dir}/*.txt"},
        "ERROR: --input: pattern '{dir}/*.txt' matches no file.",
    ),
    "input is a directory": (
        {"input": "{dir}"},
        "ERROR: --input: {dir} is a directory, not a file",
    ),
    "empty --input": (
        {"input": ""},
        "ERROR: --input names no file",
    ),
    "empty file": (
        {"input": "{empty}"},
        "ERROR: Empty corpus: no text in input file(s) {empty}.",
    ),
    "binary file": (
        {"input": "{binary}"},
        "ERROR: Input file {binary} is not text: byte 7 holds a NUL byte",
    ),
    "vocabulary is binary": (
        {"vocab_file": "{binary}"},
        "ERROR: Vocabulary file {binary} is not UTF-8 text (byte 16: invalid continuation byte); a vocabulary has one token per line.",
    ),
    "vocabulary missing": (
        {"vocab_file": "{dir}/vocab.txt"},
        "ERROR: Vocabulary file not found: {dir}/vocab.txt",
    ),
    "vocabulary without [CLS]": (
        {"vocab_file": "{no_cls}"},
        "ERROR: Vocabulary file {no_cls} is missing required special token(s) [CLS]; a BERT vocabulary needs all of",
    ),
    "--output_dir not writable": (
        {"output_dir": "/sys", "overwrite": "true"},
        "ERROR: --output_dir='/sys' is not writable:",
    ),
    "vocabulary is empty": (
        {"vocab_file": "{empty}"},
        "ERROR: Vocabulary file {empty} is empty;",
    ),
    "vocabulary is the corpus": (
        {"vocab_file": "{corpus}"},
        "ERROR: Vocabulary file {corpus} has an empty line (line 9);",
    ),
    "max_seq_length 0": (
        {"max_seq_length": "0"},
        "ERROR: --max_seq_length=0 is out of range: it must be in [8, 8192].",
    ),
    "max_seq_length 1": (
        {"max_seq_length": "1"},
        "ERROR: --max_seq_length=1 is out of range: it must be in [8, 8192].",
    ),
    "max_seq_length too large": (
        {"max_seq_length": "100000"},
        "ERROR: --max_seq_length=100000 is out of range: it must be in [8, 8192].",
    ),
    "unwritable --output_dir": (
        {"output_dir": "/sys/tupe_tf_out"},
        "ERROR: --output_dir='/sys/tupe_tf_out' is not writable:",
    ),
    "--output_dir is a file": (
        {"output_dir": "{corpus}"},
        "ERROR: --output_dir {corpus} exists and is not a directory.",
    ),
    "bad fraction": (
        {"max_unk_fraction": "2"},
        "ERROR: --max_unk_fraction=2 is out of range: it must be in [0, 1].",
    ),
}

# build_vocab.py's: (flags, start of the error line).
VOCAB_CASES = {
    "missing input": (
        {"input": "{dir}/gone.txt"},
        "ERROR: --input: file '{dir}/gone.txt' not found.",
    ),
    "binary file": (
        {"input": "{binary}"},
        "ERROR: Input file {binary} is not text: byte 7 holds a NUL byte",
    ),
    "undecodable file": (
        {"input": "{junk}"},
        "ERROR: Input file {junk} is not UTF-8 text: 200 of its 200",
    ),
    "undecodable file, TF-Text learner": (
        {"input": "{junk}", "learner": "tf_text"},
        "ERROR: Input file {junk} is not UTF-8 text: 200 of its 200",
    ),
    "empty file": (
        {"input": "{empty}"},
        "ERROR: Empty corpus: no text in input file(s) {empty}.",
    ),
    "--output is a directory": (
        {"output": "{dir}"},
        "ERROR: --output: {dir} is a directory;",
    ),
    "unwritable --output": (
        {"output": "/sys/tupe_tf_out/vocab.txt"},
        "ERROR: --output='/sys/tupe_tf_out' is not writable:",
    ),
    "vocab_size too small": (
        {"vocab_size": "3"},
        "ERROR: --vocab_size=3 is out of range: it must be >= 6.",
    ),
    "vocab_size too small for the alphabet": (
        {"vocab_size": "20"},
        "ERROR: vocab_size 20 is too small for the 5 reserved tokens and the 58 character tokens",
    ),
    "Beam with the tf_text learner": (
        {"runner": "DirectRunner", "learner": "tf_text"},
        "ERROR: --runner: Beam pipelines learn with the 'tokenizers' learner; got learner='tf_text'.",
    ),
}


def _config(config_cls, settings, files):
    """`config_cls` from `--name=value` flags, parsed as the script parses
    them (`config_flags`), the `{file}` names of `settings` filled in."""
    values = flags.FlagValues()
    config_flags.define_flags(config_cls, values)
    values(
        ["script"]
        + [
            f"--{name}={value.format(**files)}"
            for name, value in settings.items()
            if value is not None
        ]
    )
    return config_flags.config_from_flags(config_cls, values)


def _error_line(call):
    """The `ERROR:` line `cli.run` prints for what `call()` raises."""
    with pytest.raises(UserError) as raised:
        call()
    return f"ERROR: {cli.one_line(raised.value)}"


@pytest.mark.parametrize("case", sorted(SHARD_CASES))
def test_build_shards_preflight_refuses(tmp_path, files, case):
    changes, expected = SHARD_CASES[case]
    settings = {
        **conftest.good_flags("build_shards.py", files, tmp_path),
        **changes,
    }

    def preflight():
        shards_lib.preflight(_config(shards_lib.ShardConfig, settings, files))

    line = _error_line(preflight)
    assert line.startswith(expected.format(**files)), line
    assert not (tmp_path / "out").exists()
    assert not os.path.exists("/sys/tupe_tf_out")


@pytest.mark.parametrize("case", sorted(VOCAB_CASES))
def test_build_vocab_refuses(tmp_path, files, case):
    changes, expected = VOCAB_CASES[case]
    settings = {
        **conftest.good_flags("build_vocab.py", files, tmp_path),
        **changes,
    }

    def build():
        config = _config(vocab_lib.VocabConfig, settings, files)
        # What the script's `main` calls.
        if config.runner:
            beam_vocab.build_from_config(config)
        else:
            config.build()

    line = _error_line(build)
    assert line.startswith(expected.format(**files)), (case, line)
    assert not (tmp_path / "v").exists()
