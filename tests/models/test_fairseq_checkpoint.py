"""Converting the TUPE authors' fairseq checkpoints, checked on their code.

The fixtures under `tests/fixtures/fairseq_checkpoint/` were written by
their own `Trainer.save_checkpoint` (guolinke/TUPE, fairseq 0.8) with their
meters in `extra_state`: TUPE-R and TUPE-A, float32 and float16, the zip
and the legacy torch serialization; `outputs.npz` holds their model's
features and MLM logits on a padded batch and their dictionary's symbols
(`tests/fixtures/make_fairseq_checkpoint_fixture.py`, which needs their code;
these tests do not).
"""

import json
import os
import pickle
import shutil
import sys
import zipfile

import numpy as np
import pytest

import tupe_tf
from tests.test_case import to_numpy
from tests.training.conftest import run_script
from tupe_tf.convert import fairseq_checkpoint
from tupe_tf.convert import torch_pickle
from tupe_tf.convert.convert_checkpoint import convert_fairseq_checkpoint
from tupe_tf.models.fairseq.fairseq_dictionary import read_fairseq_dictionary
from tupe_tf.utils.errors import UserError

torch = pytest.importorskip("torch")

FIXTURES = os.path.join(
    os.path.dirname(__file__), "..", "fixtures", "fairseq_checkpoint"
)
DICTIONARY = os.path.join(FIXTURES, "dict.txt")
with np.load(os.path.join(FIXTURES, "outputs.npz")) as _outputs:
    OUTPUTS = {key: _outputs[key] for key in _outputs.files}
CASES = json.loads(str(OUTPUTS["cases"]))
SCRIPT = os.path.join(
    os.path.dirname(__file__),
    "..",
    "..",
    "scripts",
    "convert_fairseq_checkpoint.py",
)
PAD = 1
TOLERANCE = 2e-5


def checkpoint_path(case):
    return os.path.join(FIXTURES, f"{case}.pt")


def outputs(masked_lm, ids):
    """Features and logits at every position; the padding mask from the
    pad id, as their encoder makes it."""
    inputs = {
        "token_ids": ids,
        "segment_ids": np.zeros_like(ids),
        "padding_mask": (ids != PAD).astype("int32"),
    }
    features = masked_lm.backbone(inputs)["sequence_output"]
    positions = np.broadcast_to(np.arange(ids.shape[1]), ids.shape)
    logits = masked_lm({**inputs, "mask_positions": positions.astype("int32")})
    return to_numpy(features), to_numpy(logits)


@pytest.mark.parametrize("case", CASES)
def test_converted_preset_computes_their_model(case, tmp_path):
    rel_pos = CASES[case][0]
    preset = str(tmp_path / "preset")
    conversion = convert_fairseq_checkpoint(
        checkpoint_path(case), DICTIONARY, preset
    )
    masked_lm = tupe_tf.TupeMaskedLM.from_preset(preset)
    assert masked_lm.backbone.position_encoding == (
        "tupe-r" if rel_pos else "tupe-a"
    )
    assert conversion.backbone["vocabulary_size"] == len(
        json.loads(str(OUTPUTS["symbols"]))
    )
    ids = OUTPUTS["input_ids"]
    real = ids != PAD
    features, logits = outputs(masked_lm, ids)
    assert np.abs(features - OUTPUTS[f"features/{case}"])[real].max() < (
        TOLERANCE
    )
    assert np.abs(logits - OUTPUTS[f"logits/{case}"])[real].max() < TOLERANCE
    # The batch is padded and the logits are far from constant.
    assert not real.all()
    assert OUTPUTS[f"logits/{case}"][real].std() > 0.1


@pytest.mark.parametrize("case", CASES)
def test_reader_reads_both_serializations_and_half_precision(case):
    _, fp16, serialization = CASES[case]
    assert zipfile.is_zipfile(checkpoint_path(case)) == (serialization == "zip")
    checkpoint = fairseq_checkpoint.read_fairseq_checkpoint(
        checkpoint_path(case)
    )
    assert checkpoint.stored_dtypes == ["float16" if fp16 else "float32"]
    embedding = checkpoint.weights[fairseq_checkpoint.EMBEDDING]
    assert embedding.dtype == np.float32
    if fp16:  # upcast exactly: every value is a float16 value
        np.testing.assert_array_equal(
            embedding.astype(np.float16).astype(np.float32), embedding
        )
    # Their meters were not rebuilt, but stood in for.
    assert {
        "fairseq.meters.AverageMeter",
        "fairseq.meters.StopwatchMeter",
        "fairseq.meters.TimeMeter",
    } <= set(checkpoint.stubbed)
    assert checkpoint.args["rel_pos"] == CASES[case][0]


def test_dictionary_ids_are_their_tasks():
    symbols = read_fairseq_dictionary(DICTIONARY)
    assert symbols == json.loads(str(OUTPUTS["symbols"]))
    assert symbols[:4] == ["<s>", "<pad>", "</s>", "<unk>"]
    assert symbols[-1] == "<mask>"


def test_dictionary_holding_mask_and_bad_lines(tmp_path):
    path = tmp_path / "dict.txt"
    path.write_text("hello world 3\n<mask> 0\nnext 1\n")
    symbols = read_fairseq_dictionary(str(path))
    # A symbol may hold a space; a <mask> the file holds is not added again.
    assert symbols[7:] == ["hello world", "<mask>", "next"]
    path.write_text("hello 3\nworld\n")
    with pytest.raises(UserError, match=r"--dict=.*line 2 is 'world'"):
        read_fairseq_dictionary(str(path))


class _Payload:
    """Pickles as the call `function(*args)` (that would create a marker
    file if it ran)."""

    def __init__(self, function, *args):
        self.call = (function, args)

    def __reduce__(self):
        return self.call


@pytest.mark.parametrize("zip_file", [True, False], ids=["zip", "legacy"])
def test_nothing_pickled_is_run(tmp_path, zip_file):
    marker = tmp_path / "ran"
    path = tmp_path / "payload.pt"
    copy = _Payload(shutil.copyfile, __file__, str(marker))
    torch.save(
        {"args": copy, "w": torch.ones(2)},
        path,
        _use_new_zipfile_serialization=zip_file,
    )
    state, stubbed = torch_pickle.load_torch_file(str(path))
    assert not marker.exists()
    assert isinstance(state["args"], torch_pickle.Stub)
    assert state["args"].args == (__file__, str(marker))
    assert stubbed == ["shutil.copyfile"]
    np.testing.assert_array_equal(state["w"].numpy(), [1.0, 1.0])
    with pytest.raises(TypeError, match="not pickled again"):
        torch.save(state, tmp_path / "again.pt")


def test_a_module_torch_blocks_is_refused_and_not_run(tmp_path):
    """`os` and `sys` get no stand-in: torch refuses the whole file."""
    marker = tmp_path / "ran"
    path = tmp_path / "payload.pt"
    torch.save({"args": _Payload(os.system, f"touch {marker}")}, path)
    with pytest.raises(pickle.UnpicklingError, match="blocked"):
        torch_pickle.load_torch_file(str(path))
    assert not marker.exists()
    output = tmp_path / "out"
    with pytest.raises(UserError, match="cannot be read"):
        convert_fairseq_checkpoint(str(path), DICTIONARY, str(output))
    assert not marker.exists() and not output.exists()


def test_the_reader_lists_the_names_of_both_serializations():
    for case in ("tupe-r_fp32_zip", "tupe-a_fp32_legacy"):
        names = torch_pickle.pickled_names(checkpoint_path(case))
        assert {
            "argparse.Namespace",
            "collections.OrderedDict",
            "fairseq.meters.AverageMeter",
        } <= names


def test_missing_torch_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(UserError, match=r"tupe-tf\[convert\]"):
        torch_pickle.import_torch()


def with_changed_args(tmp_path, **changes):
    """The TUPE-R fixture with `args` changed, saved again."""
    state, _ = torch_pickle.load_torch_file(checkpoint_path("tupe-r_fp32_zip"))
    state["extra_state"] = {}  # the meters' stand-ins are not saved again
    vars(state["args"]).update(changes)
    path = tmp_path / f"{'-'.join(sorted(changes))}.pt"
    torch.save(state, path)
    return str(path)


# RoBERTa's roberta_base (fairseq/models/roberta): learned positions added
# to the input, no untied attention.
ROBERTA_ARGS = dict(
    arch="roberta_base",
    encoder_learned_pos=True,
    encoder_normalize_before=False,
    max_positions=512,
)


def bad_inputs(tmp_path):
    """`(name, flags of convert_fairseq_checkpoint, what the message must
    name)` for each kind of bad input."""
    checkpoint = checkpoint_path("tupe-r_fp32_zip")
    data = open(checkpoint, "rb").read()
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(data[: len(data) // 2])
    legacy = open(checkpoint_path("tupe-a_fp32_legacy"), "rb").read()
    truncated_legacy = tmp_path / "truncated_legacy.pt"
    truncated_legacy.write_bytes(legacy[: len(legacy) - 1000])
    noise = tmp_path / "noise.pt"
    noise.write_bytes(np.random.default_rng(0).bytes(4096))
    tensors = tmp_path / "tensors.pt"
    torch.save({"weight": torch.zeros(3)}, tensors)
    newer = tmp_path / "newer.pt"
    torch.save({"cfg": {"model": {}}, "model": {}}, newer)
    short_dictionary = tmp_path / "dict.txt"
    short_dictionary.write_text(
        "".join(open(DICTIONARY).readlines()[:-1]), encoding="utf-8"
    )
    roberta = with_changed_args(tmp_path, **ROBERTA_ARGS)
    return [
        ("roberta", dict(checkpoint=roberta), "--arch=roberta_base"),
        (
            "no embedding normalize",
            dict(
                checkpoint=with_changed_args(
                    tmp_path, embedding_normalize=False
                )
            ),
            "--embedding-normalize=False",
        ),
        ("truncated zip", dict(checkpoint=str(truncated)), "truncated"),
        (
            "truncated legacy",
            dict(checkpoint=str(truncated_legacy)),
            "truncated",
        ),
        ("random bytes", dict(checkpoint=str(noise)), "--checkpoint"),
        ("plain tensors", dict(checkpoint=str(tensors)), "not a fairseq"),
        ("fairseq >= 0.10", dict(checkpoint=str(newer)), "fairseq 0.10"),
        (
            "args not the weights",
            dict(checkpoint=with_changed_args(tmp_path, encoder_layers=3)),
            "do not match its args",
        ),
        ("short dictionary", dict(dictionary=str(short_dictionary)), "--dict"),
    ]


def assert_refused(tmp_path, changes, named):
    """`convert_fairseq_checkpoint` with `changes` to the TUPE-R fixture's
    arguments refuses naming `named` and writes nothing."""
    output = tmp_path / "out" / "preset"
    arguments = {
        "checkpoint": checkpoint_path("tupe-r_fp32_zip"),
        "dictionary": DICTIONARY,
        "output": str(output),
        **changes,
    }
    with pytest.raises(UserError) as refused:
        convert_fairseq_checkpoint(**arguments)
    assert named in str(refused.value)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "name",
    [
        "roberta",
        "no embedding normalize",
        "truncated zip",
        "truncated legacy",
        "random bytes",
        "plain tensors",
        "fairseq >= 0.10",
        "args not the weights",
        "short dictionary",
    ],
)
def test_bad_inputs_are_refused_and_write_nothing(tmp_path, name):
    cases = {
        case: (changes, named) for case, changes, named in bad_inputs(tmp_path)
    }
    assert_refused(tmp_path, *cases[name])


def test_bpe_codes_of_another_dictionary_are_refused(tmp_path):
    codes = tmp_path / "bpe-code"
    codes.write_text("Ġ t 10\nĠt he 9\nq u 8\n", encoding="utf-8")
    assert_refused(tmp_path, dict(bpe_codes=str(codes)), "--bpe_codes")


def test_bpe_codes_give_the_preset_their_tokenizer(tmp_path):
    pytest.importorskip("sacremoses")  # the fairseq-text extra
    codes = tmp_path / "bpe-code"
    # Merges to th@@, the, caf@@ (via ca@@, not in the dictionary), un@@
    # and known.
    codes.write_text(
        "t h 9\nth e</w> 8\nc a 7\nca f 6\nu n 5\nkn own</w> 4\n",
        encoding="utf-8",
    )
    preset = str(tmp_path / "preset")
    conversion = convert_fairseq_checkpoint(
        checkpoint_path("tupe-a_fp16_zip"), DICTIONARY, preset, str(codes)
    )
    assert conversion.bpe_merges_in_dictionary == (5, 6)
    symbols = read_fairseq_dictionary(DICTIONARY)
    tokenizer = tupe_tf.TupeFairseqTokenizer.from_preset(preset)
    ids = to_numpy(tokenizer("The cafe")).tolist()
    assert [symbols[i] for i in ids] == ["the", "caf@@", "<unk>"]
    # The masked LM has no preprocessor; a classifier gets their packing.
    assert tupe_tf.TupeMaskedLM.from_preset(preset).preprocessor is None
    classifier = tupe_tf.TupeTextClassifier.from_preset(preset, num_classes=2)
    assert isinstance(
        classifier.preprocessor, tupe_tf.TupeFairseqTextClassifierPreprocessor
    )


@pytest.mark.parametrize(
    "changes, named",
    [
        (dict(encoder_normalize_before=True), "--encoder-normalize-before"),
        (dict(activation_fn="relu"), "--activation-fn='relu'"),
    ],
)
def test_args_tupe_tf_cannot_compute_are_named(tmp_path, changes, named):
    checkpoint = fairseq_checkpoint.read_fairseq_checkpoint(
        with_changed_args(tmp_path, **changes)
    )
    with pytest.raises(UserError, match=named):
        fairseq_checkpoint.backbone_arguments(checkpoint)


def _script(*args):
    return run_script(SCRIPT, args, timeout=300)


@pytest.mark.large
def test_script_converts_and_refuses_in_one_line(tmp_path):
    output = tmp_path / "preset"
    result = _script(
        f"--checkpoint={checkpoint_path('tupe-r_fp16_legacy')}",
        f"--dict={DICTIONARY}",
        f"--output={output}",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "tupe-r, 2 layers x 32, 49 token ids" in result.stdout
    assert "float16" in result.stdout
    tupe_tf.check_preset(str(output))
    in_script = ("roberta", "truncated zip", "short dictionary")
    for name, changes, named in bad_inputs(tmp_path):
        if name not in in_script:
            continue
        flags = {
            "checkpoint": checkpoint_path("tupe-r_fp32_zip"),
            "dict": DICTIONARY,
            "output": str(tmp_path / "out" / "preset"),
        }
        flags.update(
            {
                ("dict" if k == "dictionary" else k): v
                for k, v in changes.items()
            }
        )
        result = _script(*(f"--{k}={v}" for k, v in flags.items()))
        errors = [
            line
            for line in result.stderr.splitlines()
            if line.startswith("ERROR:")
        ]
        assert result.returncode == 2, (name, result.stderr[-3000:])
        assert "Traceback" not in result.stderr, name
        assert len(errors) == 1 and named in errors[0], (name, errors)
        assert not (tmp_path / "out").exists(), name
