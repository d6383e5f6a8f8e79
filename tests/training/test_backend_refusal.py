"""The TensorFlow-only training entry points refuse other Keras backends
before they read or write anything."""

import keras
import pytest

from tupe_tf.training import GlueConfig
from tupe_tf.training import PretrainConfig
from tupe_tf.training import run_glue
from tupe_tf.training import run_pretraining
from tupe_tf.utils.errors import UserError


@pytest.fixture
def on_jax(monkeypatch):
    monkeypatch.setattr(keras.backend, "backend", lambda: "jax")


def test_pretraining_is_refused(on_jax, tmp_path):
    model_dir = tmp_path / "model"
    with pytest.raises(UserError, match="Pre-training with run_pretraining"):
        run_pretraining(PretrainConfig(model_dir=str(model_dir)))
    assert not model_dir.exists()


def test_glue_fine_tuning_is_refused(on_jax, tmp_path):
    with pytest.raises(UserError, match="GLUE fine-tuning with run_glue"):
        run_glue(
            GlueConfig(
                task="cola",
                preset=str(tmp_path / "missing"),
                output_dir=str(tmp_path / "out"),
            )
        )
    assert not (tmp_path / "out").exists()
