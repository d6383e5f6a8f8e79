"""tupe-tf computes the TUPE authors' model, checked on their own outputs.

The fixtures `tests/fixtures/tupe_reference_<variant>.npz` hold the state
dict, a padded batch, the last-layer features and the MLM logits of a tiny
model built and run by the authors' code (guolinke/TUPE); they are written
by `tests/fixtures/make_tupe_reference_fixture.py` (needs torch and their code,
which these tests do not).
"""

import json
import os

import numpy as np
import pytest

import tupe_tf
from tests.test_case import to_numpy

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures")
# The authors' settings beyond the positional encoding (docs/spec.md).
AUTHORS = dict(
    layer_norm_epsilon=1e-5,
    intermediate_activation="gelu",
    segment_encoding="none",
)
VARIANTS = {
    "tupe-r": dict(position_encoding="tupe-r", cls_relative="reference"),
    "tupe-a": dict(position_encoding="tupe-a"),
}


def load_fixture(variant):
    with np.load(
        os.path.join(FIXTURES, f"tupe_reference_{variant}.npz")
    ) as data:
        fixture = {key: data[key] for key in data.files}
    fixture["config"] = json.loads(str(fixture["config"]))
    fixture["state"] = {
        key[len("state/") :]: value
        for key, value in fixture.items()
        if key.startswith("state/")
    }
    return fixture


def masked_lm_with_their_weights(variant, fixture, **options):
    # Their model's sizes; `pad_id` (their dictionary's) makes the mask.
    sizes = {k: v for k, v in fixture["config"].items() if k != "pad_id"}
    backbone = tupe_tf.TupeBackbone(
        **sizes, **dict(VARIANTS[variant], **options)
    )
    masked_lm = tupe_tf.TupeMaskedLM(backbone, preprocessor=None)
    tupe_tf.load_tupe_reference_weights(masked_lm, fixture["state"])
    return masked_lm


def outputs(masked_lm, fixture):
    """Features and logits at every position, and the non-pad mask."""
    ids = fixture["input_ids"]
    real = ids != fixture["config"]["pad_id"]
    inputs = {
        "token_ids": ids,
        "segment_ids": np.zeros_like(ids),
        "padding_mask": real.astype("int32"),
    }
    features = masked_lm.backbone(inputs)["sequence_output"]
    positions = np.broadcast_to(np.arange(ids.shape[1]), ids.shape)
    logits = masked_lm({**inputs, "mask_positions": positions.astype("int32")})
    return to_numpy(features), to_numpy(logits), real


def max_differences(masked_lm, fixture):
    features, logits, real = outputs(masked_lm, fixture)
    return (
        np.abs(features - fixture["features"])[real].max(),
        np.abs(logits - fixture["logits"])[real].max(),
    )


@pytest.mark.parametrize("variant", VARIANTS)
def test_features_and_logits_equal_the_authors_code(variant):
    fixture = load_fixture(variant)
    masked_lm = masked_lm_with_their_weights(variant, fixture, **AUTHORS)
    feature_difference, logit_difference = max_differences(masked_lm, fixture)
    assert feature_difference < 1e-5
    assert logit_difference < 1e-5
    # The fixture has padding, and the outputs are not trivial.
    _, _, real = outputs(masked_lm, fixture)
    assert not real.all()
    assert fixture["logits"][real].std() > 0.1


@pytest.mark.parametrize("variant", VARIANTS)
def test_keras_hub_bert_settings_do_not_reproduce_it(variant):
    """The epsilon and the activation each matter well above round-off."""
    fixture = load_fixture(variant)
    for changed in (
        dict(layer_norm_epsilon=1e-12),
        dict(intermediate_activation="gelu_approximate"),
    ):
        masked_lm = masked_lm_with_their_weights(
            variant, fixture, **dict(AUTHORS, **changed)
        )
        assert max(max_differences(masked_lm, fixture)) > 1e-4, changed


def test_weights_of_another_layout_are_refused():
    fixture = load_fixture("tupe-r")
    with pytest.raises(ValueError, match="cls_relative='reference'"):
        masked_lm_with_their_weights(
            "tupe-r", fixture, **AUTHORS, cls_relative="reset"
        )
    with pytest.raises(ValueError, match="unused.*relative_attention_bias"):
        masked_lm_with_their_weights("tupe-a", fixture, **AUTHORS)
    with pytest.raises(ValueError, match="segment_encoding='none'"):
        masked_lm_with_their_weights(
            "tupe-r",
            fixture,
            layer_norm_epsilon=1e-5,
            intermediate_activation="gelu",
        )
