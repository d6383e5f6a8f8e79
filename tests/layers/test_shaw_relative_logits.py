import keras
import numpy as np
import pytest
from absl.testing import parameterized

from tests import numpy_reference as ref
from tests.test_case import REDUCED_PRECISION_POLICIES
from tests.test_case import TestCase
from tests.test_case import assert_allclose
from tests.test_case import jit_compiled
from tests.test_case import randomize
from tests.test_case import tensorflow_only
from tests.test_case import to_numpy
from tupe_tf.layers import ShawRelativeLogits


def queries(batch=2, n=7, heads=3, head_dim=4, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(batch, n, heads, head_dim)).astype("float32")


def built_layer(head_dim=4, max_distance=3, seed=1):
    layer = ShawRelativeLogits(head_dim=head_dim, max_distance=max_distance)
    layer.build()
    randomize(layer, seed=seed)
    return layer


class ShawRelativeLogitsTest(TestCase):
    def test_layer_basics(self):
        q = queries()
        # The term is float32 under every policy, like the biases, so
        # keras-hub's training and precision checks do not apply (see
        # `run_position_bias_test`); the policies are checked below.
        self.run_layer_test(
            cls=ShawRelativeLogits,
            init_kwargs={"head_dim": 4, "max_distance": 3},
            input_data={"query": q, "key": q[:, :5]},
            expected_output_shape=(2, 3, 7, 5),
            expected_num_trainable_weights=1,
            run_training_check=False,
            run_precision_checks=False,
        )

    @parameterized.parameters(
        # (n, m, k): clipped on both sides, within reach, cross lengths.
        (7, 7, 3),
        (5, 5, 10),
        (6, 4, 2),
        (3, 8, 4),
        (1, 5, 2),
        (5, 1, 2),
    )
    def test_matches_numpy_spec(self, n, m, max_distance):
        layer = built_layer(max_distance=max_distance)
        q, k = queries(n=n), queries(n=m, seed=2)
        table = to_numpy(layer.relative_keys).astype("float64")
        assert table.shape == (2 * max_distance + 1, 4)
        expected = ref.shaw_logits(q.astype("float64"), table, m)
        logits = to_numpy(layer(q, k))
        assert logits.dtype == np.float32
        assert_allclose(logits, expected, atol=1e-5)

    def test_xla_matches_eager(self):
        layer = built_layer()
        q = queries(n=9)
        compiled = jit_compiled(lambda x: layer(x, x))
        assert_allclose(compiled(q), layer(q, q), atol=1e-6)

    @parameterized.parameters(*REDUCED_PRECISION_POLICIES)
    def test_float32_term_under_reduced_precision(self, policy):
        keras.config.set_dtype_policy(policy)
        try:
            layer = ShawRelativeLogits(head_dim=4, max_distance=3)
            q = keras.ops.cast(queries(), layer.compute_dtype)
            logits = layer(q, q)
        finally:
            keras.config.set_dtype_policy("float32")
        self.assertDTypeEqual(logits, "float32")
        # The table follows the policy, as the projections' kernels do.
        self.assertDTypeEqual(layer.relative_keys, layer.variable_dtype)


@tensorflow_only("a graph with a dynamic length")
def test_dynamic_length_graph_has_no_rank_5_tensor_nor_score_gather():
    """No op of the graph makes a `(batch, heads, n, m, d)` tensor, and the
    one gather reads the table, not the scores (a gather's gradient is a
    scatter-add, slow on accelerators)."""
    import tensorflow as tf

    layer = built_layer(max_distance=3)
    spec = tf.TensorSpec([None, None, 3, 4], tf.float32)
    function = tf.function(lambda q, k: layer(q, k))
    q, k = queries(n=8), queries(n=6, seed=2)
    assert_allclose(function(q, k), layer(q, k), atol=1e-6)
    graph = function.get_concrete_function(spec, spec).graph
    ranks = [
        output.shape.rank
        for op in graph.get_operations()
        for output in op.outputs
    ]
    assert max(r for r in ranks if r is not None) == 4
    gathers = [op for op in graph.get_operations() if "Gather" in op.type]
    assert [op.inputs[0].shape.rank for op in gathers] == [2]


def test_gradient_reaches_only_reachable_rows():
    """At length 4 with k = 6 only the rows of distances -3..3 are used."""
    layer = built_layer(max_distance=6)
    q = queries(n=4)
    if keras.backend.backend() != "tensorflow":
        pytest.skip("the gradient is checked once, with TensorFlow's tape")
    import tensorflow as tf

    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(layer(q, q) ** 2)
    grad = to_numpy(tape.gradient(loss, layer.relative_keys))
    used = np.abs(grad).sum(-1) > 0
    assert used.tolist() == [False] * 3 + [True] * 7 + [False] * 3
