import tensorflow as tf

from tupe_tf.export.saved_model_root import SavedModelRoot


def test_the_variable_lists_are_saved_as_attributes(tmp_path):
    kernel = tf.Variable(2.0, name="kernel")
    frozen = tf.Variable(3.0, name="frozen", trainable=False)
    root = SavedModelRoot()
    assert (root.variables, root.trainable_variables) == ((), ())
    root.variables = [kernel, frozen]
    root.trainable_variables = [kernel]
    root.regularization_losses = []
    root.serve = tf.function(
        lambda x: x * kernel + frozen,
        input_signature=[tf.TensorSpec([], tf.float32)],
        autograph=False,
    )
    tf.saved_model.save(root, str(tmp_path))
    loaded = tf.saved_model.load(str(tmp_path))
    assert [v.name for v in loaded.variables] == ["kernel:0", "frozen:0"]
    assert [v.name for v in loaded.trainable_variables] == ["kernel:0"]
    assert list(loaded.regularization_losses) == []
    assert float(loaded.serve(tf.constant(1.0))) == 5.0
    # Nothing else is saved: the two variables only.
    saved = tf.train.list_variables(str(tmp_path / "variables" / "variables"))
    assert len([name for name, _ in saved if "VARIABLE_VALUE" in name]) == 2
