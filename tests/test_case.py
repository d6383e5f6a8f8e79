"""The test harness: keras-hub's `TestCase` and the helpers tests share.

`TestCase` is keras-hub's own (`keras_hub/src/tests/test_case.py`), so the
layers and models are held to the checks keras-hub's own are:

- `run_layer_test`: the config and serialization round trips, build,
  symbolic and eager calls, output shape and dtype, a compiled training
  step and the three reduced-precision policies. Inputs are passed on as
  tensors: keras-hub's precision check calls `compute_output_spec` on the
  data, which reads no shape from a NumPy array.
- `run_position_bias_test`: `run_layer_test` for the bias layers (each
  `PositionBiasLayer` and `SegmentAttentionBias`), less two parts that do
  not apply to them. Their output `(units, 1 or batch, heads, n, n)` has
  the layers, not the batch, on its first axis, so the training step has
  nothing to fit it against; and it is float32 under every policy (SPEC),
  which keras-hub's precision check refuses. Instead it checks that output
  and weights stay float32 under each of those policies.
- `run_serialization_test`: every `from_config` round trip. It compares
  `dir()` of the original and the clone too, so it is given an instance
  that has not been built.
- `run_backbone_test` (in `tests/models`): without keras-hub's
  mixed-precision check, which expects every sublayer to compute in the
  policy's dtype while the positional layers compute in float32
  (`test_mixed_bfloat16` checks the actual contract), and, except for the
  `bert` option, without its quantization check, which expects every
  `Dense` to take the policy map while the positional layers keep theirs
  in float32.
- `run_preset_test` (in `tests/models`): a preset the test saves.

keras-hub's class is a `tf.test.TestCase`: tests are its methods,
parametrized with `absl.testing.parameterized`, and temporary directories
come from `self.get_temp_dir()`. pytest runs them; its markers and the
autouse fixtures of `tests/conftest.py` apply.

Example:
```python
class AlibiPositionBiasTest(TestCase):
    def test_layer_basics(self):
        self.run_position_bias_test(
            cls=AlibiPositionBias,
            init_kwargs={"num_heads": 6, "max_sequence_length": 16},
            input_data=np.zeros((3, 9), "int32"),
            expected_output_shape=(1, 1, 6, 9, 9),
        )
```
"""

import importlib.util
import inspect

import keras
import numpy as np
import pytest
from keras_hub.src.tests.test_case import TestCase as KerasHubTestCase

from tests.sizes import encoder_sizes

REDUCED_PRECISION_POLICIES = ("mixed_float16", "mixed_bfloat16", "bfloat16")
SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
# The word pieces of the tests' tokenizers: the model tests use the first
# 15; the export tests add punctuation, a split word, CJK and negations.
WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumped",
    "over",
    "lazy",
    "dog",
    "a",
    "cat",
    "sat",
    "on",
    "mat",
    "##s",
    ".",
    "!",
    ",",
    "cafe",
    "un",
    "##believ",
    "##able",
    "猫",
    "is",
    "not",
    "good",
    "bad",
    "very",
]


def tensorflow_only(reason):
    """Skips a test on JAX and PyTorch: what it checks exists only in
    TensorFlow (`reason` says what, e.g. a graph with a dynamic length)."""
    return pytest.mark.skipif(
        keras.backend.backend() != "tensorflow",
        reason=f"TensorFlow only: {reason}",
    )


# Tests that run one model on every Keras backend need all three installed.
every_backend = pytest.mark.skipif(
    not all(importlib.util.find_spec(name) for name in ("jax", "torch")),
    reason='needs JAX and PyTorch: pip install -e ".[jax]" torch==2.13.0',
)


def tiny_backbone(position_encoding="bert", **arguments):
    """A 2-layer, 2-head, hidden-16 `TupeBackbone` (vocabulary 50, length 16);
    `arguments` override any backbone argument."""
    import tupe_tf

    settings = dict(
        encoder_sizes(),
        vocabulary_size=50,
        max_sequence_length=16,
        position_encoding=position_encoding,
    )
    return tupe_tf.TupeBackbone(**{**settings, **arguments})


def randomize(model, seed=0):
    """Gives every weight of `model` (a layer or a model) random values.

    LayerNorm gammas become `1 + N(0, 0.2)`, every other weight `N(0, 0.3)`,
    zero-initialised biases and tables included, so that a comparison with
    a NumPy reference cannot pass by accident.
    """
    from tupe_tf.utils.backend import assign_seeded_weights

    assign_seeded_weights(model, seed, stddev=0.3, gamma_stddev=0.2)


def to_numpy(data):
    """`data` (a structure of tensors, variables or arrays) as NumPy arrays
    on every backend (PyTorch tensors that need a gradient included)."""
    return keras.tree.map_structure(
        lambda x: np.asarray(keras.ops.convert_to_numpy(x)), data
    )


def assert_allclose(actual, desired, **kwargs):
    """`np.testing.assert_allclose` of tensors, on every backend."""
    np.testing.assert_allclose(to_numpy(actual), to_numpy(desired), **kwargs)


def assert_array_equal(actual, desired, **kwargs):
    """`np.testing.assert_array_equal` of tensors, on every backend."""
    np.testing.assert_array_equal(to_numpy(actual), to_numpy(desired), **kwargs)


def allclose(a, b, **kwargs):
    """`np.allclose` of tensors, on every backend."""
    return np.allclose(to_numpy(a), to_numpy(b), **kwargs)


def gradients(model, loss_of_outputs, inputs, variables):
    """`d loss / d v` for each of `variables` (trainable weights of `model`)
    as NumPy, on the current backend; `loss_of_outputs` maps the model's
    training-mode outputs to a scalar. A variable the loss does not reach
    gets None (TensorFlow, PyTorch) or zeros (JAX)."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as tape:
            loss = loss_of_outputs(model(inputs, training=True))
        grads = tape.gradient(loss, variables)
    elif backend == "jax":
        import jax

        trainable = model.trainable_variables
        non_trainable = [v.value for v in model.non_trainable_variables]

        # `__call__` drops `training` for a layer whose `call` has none;
        # `stateless_call` passes it on, so it is given only where taken.
        takes_training = "training" in inspect.signature(model.call).parameters
        mode = {"training": True} if takes_training else {}

        def loss_of(values):
            outputs, _ = model.stateless_call(
                values, non_trainable, inputs, **mode
            )
            return loss_of_outputs(outputs)

        all_grads = jax.grad(loss_of)([v.value for v in trainable])
        index = {id(v): i for i, v in enumerate(trainable)}
        grads = [all_grads[index[id(v)]] for v in variables]
    else:
        for variable in variables:
            variable.value.grad = None
        loss_of_outputs(model(inputs, training=True)).backward()
        grads = [variable.value.grad for variable in variables]
    return [None if g is None else to_numpy(g) for g in grads]


def jit_compiled(fn):
    """`fn` compiled with XLA: `tf.function(jit_compile=True)` on
    TensorFlow, `jax.jit` on JAX. On PyTorch `fn` itself, as in keras-hub's
    own tests (`torch.compile` of a Keras model takes minutes on CPU)."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.function(fn, jit_compile=True)
    if backend == "jax":
        import jax

        return jax.jit(fn)
    return fn


def as_tensors(data):
    """`data` (a structure of arrays) with every array a tensor."""
    return keras.tree.map_structure(keras.ops.convert_to_tensor, data)


class TestCase(KerasHubTestCase):
    """keras-hub's `TestCase` with this package's layer checks."""

    # tf.test.TestCase's deprecated session helper, which test runners
    # would otherwise collect as a skipped test of every class.
    test_session = None

    def run_layer_test(
        self,
        cls,
        init_kwargs,
        input_data,
        expected_output_shape,
        **kwargs,
    ):
        """keras-hub's `run_layer_test`, the inputs passed as tensors."""
        super().run_layer_test(
            cls,
            init_kwargs,
            as_tensors(input_data),
            expected_output_shape,
            **kwargs,
        )

    def run_position_bias_test(
        self,
        cls,
        init_kwargs,
        input_data,
        expected_output_shape,
        expected_num_trainable_weights=0,
    ):
        """`run_layer_test` for a bias layer (see the module docstring)."""
        self.run_layer_test(
            cls,
            init_kwargs,
            input_data,
            expected_output_shape,
            expected_num_trainable_weights=expected_num_trainable_weights,
            run_training_check=False,
            run_precision_checks=False,
        )
        for policy in REDUCED_PRECISION_POLICIES:
            keras.config.set_dtype_policy(policy)
            try:
                layer = cls(**init_kwargs)
                output = layer(as_tensors(input_data))
            finally:
                keras.config.set_dtype_policy("float32")
            self.assertEqual(layer.compute_dtype, "float32", msg=policy)
            for tensor in keras.tree.flatten(output):
                self.assertDTypeEqual(tensor, "float32", msg=policy)
            for weight in layer.weights:
                self.assertDTypeEqual(weight, "float32", msg=policy)
