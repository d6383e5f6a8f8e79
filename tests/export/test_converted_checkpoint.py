"""A preset converted from the TUPE authors' checkpoint exports as a hub
encoder on token ids, which a fresh process loads; its text formats are
refused, their tokenizer's steps being Python."""

import os

import numpy as np
import pytest

from tests.converted_preset import OUTPUTS
from tests.converted_preset import PAD_ID
from tests.converted_preset import converted_preset
from tests.export.conftest import in_memory_encoder_outputs
from tests.export.test_export_lib import _assert_one_error_line
from tests.export.test_export_lib import _script
from tests.export.test_loading_in_fresh_process import run_checks

pytestmark = pytest.mark.large

CASE = "tupe-r_fp32_zip"
# Their model's features hold to this (tests/models/test_fairseq_checkpoint).
THEIR_TOLERANCE = 2e-5


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    pytest.importorskip("torch")
    pytest.importorskip("sacremoses")
    return converted_preset(str(tmp_path_factory.mktemp("converted")), CASE)


def test_hub_encoder_of_their_model_loads_in_a_fresh_process(
    converted, tmp_path
):
    import tupe_tf

    with np.load(OUTPUTS) as outputs:
        ids = outputs["input_ids"].astype("int32")  # their padded batch
        theirs = outputs[f"features/{CASE}"]
    encoder = str(tmp_path / "encoder")
    result = _script(
        f"--preset={converted}",
        f"--export_dir={encoder}",
        "--format=hub_encoder",
        f"--seq_length={ids.shape[1]}",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    inputs = {
        "input_word_ids": ids,
        "input_mask": (ids != PAD_ID).astype("int32"),
        "input_type_ids": np.zeros_like(ids),
    }
    backbone = tupe_tf.TupeBackbone.from_preset(converted)
    expected = in_memory_encoder_outputs(backbone, inputs)
    real = ids != PAD_ID
    assert not real.all()
    assert (
        np.abs(expected["sequence_output"] - theirs)[real].max()
        < THEIR_TOLERANCE
    )
    reference = str(tmp_path / "reference.npz")
    np.savez(
        reference,
        encoder=encoder,
        num_layers=backbone.num_layers,
        num_trainable=len(backbone.trainable_weights),
        pooled_output=expected["pooled_output"],
        sequence_output=expected["sequence_output"],
        **inputs,
        **{
            f"encoder_outputs_{i}": t
            for i, t in enumerate(expected["encoder_outputs"])
        },
    )
    passed = run_checks("encoder", reference)[reference]
    assert len(passed) == 5, passed


def test_text_formats_are_refused_naming_the_encoder(converted, tmp_path):
    import tupe_tf.export

    out = tmp_path / "out"
    result = _script(
        f"--preset={converted}", f"--export_dir={out}", "--format=serving"
    )
    _assert_one_error_line(result, "TupeFairseqTokenizer")
    assert "--format=hub_encoder" in result.stderr
    with pytest.raises(ValueError, match="TupeFairseqTokenizer.*hub_encoder"):
        tupe_tf.export.export_preset(converted, str(out), "hub_preprocessor")
    assert not os.path.exists(out)
