"""TupeBackbone compiled and in mixed precision: a graph of dynamic
length, XLA and the folded bias, torch.compile, mixed_bfloat16 and Keras'
compiled train step, against the same model run eagerly in float32."""

import keras
import keras_hub
import numpy as np
import pytest
from keras.backend import standardize_dtype

import tupe_tf
from tests.models.backbone_cases import HIDDEN
from tests.models.backbone_cases import MAX_LEN
from tests.models.backbone_cases import make_backbone
from tests.models.backbone_cases import make_inputs
from tests.models.backbone_cases import shaw_tables
from tests.test_case import assert_allclose
from tests.test_case import jit_compiled
from tests.test_case import randomize
from tests.test_case import tensorflow_only
from tests.test_case import to_numpy


@tensorflow_only("a graph with a dynamic length")
@pytest.mark.parametrize(
    "option", ["bert", "tupe-r", "diet-rel", "sinusoidal", "nope"]
)
def test_too_long_dynamic_batch_is_refused_in_the_graph(option):
    import tensorflow as tf

    backbone = make_backbone(position_encoding=option)
    inputs = make_inputs(length=MAX_LEN + 4, real=(MAX_LEN + 4, 3))

    @tf.function(
        input_signature=[
            {k: tf.TensorSpec([None, None], tf.int32) for k in inputs}
        ]
    )
    def dynamic(batch):
        return backbone(batch)["sequence_output"]

    with pytest.raises(
        tf.errors.InvalidArgumentError, match="max_sequence_length=16"
    ):
        dynamic(inputs)
    # In-range dynamic lengths still work.
    assert dynamic(make_inputs(length=11, real=(11, 4))).shape == (
        2,
        11,
        HIDDEN,
    )


@pytest.mark.parametrize("option", tupe_tf.POSITION_ENCODINGS)
def test_variable_lengths_xla_and_fold(option):
    backbone = make_backbone(
        position_encoding=option, segment_encoding="per-head"
    )
    randomize(backbone, seed=2)
    compiled = jit_compiled(lambda batch: backbone(batch)["sequence_output"])
    for length in (5, 12, MAX_LEN):
        inputs = make_inputs(length=length, real=(length, length - 2))
        eager = to_numpy(backbone(inputs)["sequence_output"])
        assert_allclose(compiled(inputs), eager, atol=1e-5)
        backbone.fold_positional_bias([length])
        assert_allclose(backbone(inputs)["sequence_output"], eager, atol=1e-5)
        backbone.unfold_positional_bias()


@pytest.mark.skipif(
    keras.backend.backend() != "torch", reason="torch.compile is PyTorch's"
)
def test_torch_compile_predicts_as_eager():
    """`jit_compile=True` on PyTorch is `torch.compile`. It takes most of a
    minute per model on CPU, so one option: the one with most parts
    (untied positions, relative buckets, per-head segments)."""
    import torch

    backbone = make_backbone(
        position_encoding="tupe-r", segment_encoding="per-head"
    )
    randomize(backbone, seed=3)
    inputs = make_inputs(length=12, real=(12, 9))
    eager = to_numpy(backbone(inputs)["sequence_output"])
    backbone.compile(jit_compile=True)
    torch._dynamo.utils.counters.clear()
    compiled = backbone.predict(inputs, verbose=0)["sequence_output"]
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] > 0
    assert_allclose(compiled, eager, atol=1e-5)


@pytest.mark.parametrize("option", tupe_tf.POSITION_ENCODINGS)
def test_mixed_bfloat16(option):
    float_model = make_backbone(position_encoding=option)
    randomize(float_model, seed=4)
    mixed = make_backbone(position_encoding=option, dtype="mixed_bfloat16")
    mixed.set_weights(float_model.get_weights())
    positional = mixed.position_bias
    if option == "sinusoidal":  # the input table
        positional = mixed.position_embedding
    if positional is not None:  # the float32 positional part (SPEC)
        assert positional.compute_dtype == "float32"
    if mixed.position_bias is not None:
        bias = mixed.position_bias(np.zeros((1, 12), "int32"))
        assert standardize_dtype(bias.dtype) == "float32"
    assert mixed.transformer_layers[0].compute_dtype == "bfloat16"
    for table in shaw_tables(mixed):  # computes in bfloat16, like q.k
        assert standardize_dtype(table.dtype) == "float32"
        assert mixed.transformer_layers[0].query_logits.compute_dtype == (
            "bfloat16"
        )
    inputs = make_inputs()
    expected = to_numpy(float_model(inputs)["sequence_output"])
    actual = mixed(inputs)["sequence_output"]
    assert standardize_dtype(actual.dtype) == "bfloat16"
    actual = to_numpy(keras.ops.cast(actual, "float32"))
    assert np.isfinite(actual).all()
    # bf16 has ~3 significant digits; outputs are LayerNorm-scaled.
    assert np.abs(actual - expected).mean() < 0.05


@pytest.mark.parametrize("option", tupe_tf.POSITION_ENCODINGS)
def test_compiled_masked_lm_train_step(option):
    """Keras' compiled train step (XLA on TensorFlow and JAX, keras-hub's
    default `jit_compile="auto"`) updates the positional weights."""
    backbone = make_backbone(position_encoding=option)
    mlm = keras_hub.models.BertMaskedLM(backbone, preprocessor=None)
    mlm.compile(
        optimizer=keras.optimizers.SGD(0.1),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    inputs = make_inputs()
    inputs["mask_positions"] = np.array([[1, 2], [3, 4]], "int32")
    labels = np.array([[5, 6], [7, 8]], "int32")
    positional = shaw_tables(backbone)
    if backbone.position_bias is not None:
        positional += backbone.position_bias.trainable_weights
    before = to_numpy(positional)
    logs = mlm.train_on_batch(inputs, labels, return_dict=True)
    assert np.isfinite(logs["loss"])
    after = to_numpy(positional)
    if before:
        assert not all(map(np.array_equal, before, after))


@pytest.mark.large
def test_mixed_bfloat16_trains_through_xla():
    """One option: XLA compiles are slow on CPU."""
    mixed = make_backbone(position_encoding="tupe-r", dtype="mixed_bfloat16")
    randomize(mixed, seed=4)
    inputs = make_inputs()
    mlm = keras_hub.models.BertMaskedLM(mixed, preprocessor=None)
    mlm.compile(
        optimizer="adam",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=True,
    )
    x = {**inputs, "mask_positions": np.array([[1, 2], [3, 4]], "int32")}
    history = mlm.fit(x, np.array([[5, 6], [7, 8]]), epochs=2, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
