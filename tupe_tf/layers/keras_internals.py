"""The one place tupe-tf uses Keras internals (`keras.src`, private members).

Keras 3.15 has no public form of these; each is used for the reason given,
and every other module reaches them through here, so a Keras upgrade that
moves one breaks exactly this module (setup.py accepts only the Keras minor
release the tests run on).

- `attention_dropout_layer`: the `Dropout` layer that
  `keras.layers.MultiHeadAttention` builds for the attention probabilities
  (`_dropout_layer`). The layer exposes its rate (`dropout`) and its
  projections (`query_dense`, ...), not this layer. `BiasedMultiHeadAttention`
  computes the probabilities itself and applies this dropout to them. A
  `Dropout` of its own would be a second, unused-by-the-parent seed
  generator: one more variable in the layer's checkpoints and exports,
  and one more seed drawn while building, which would change every later
  layer's initial weights under a fixed `keras.utils.set_random_seed`.
- `optimizer_variable_index`, `uses_weight_decay`: a
  `keras.optimizers.Optimizer` subclass's `update_step` finds the slots
  (`add_optimizer_variables`' lists) of a variable by its index
  (`_get_variable_index`, which also knows the variables of a
  `tf.distribute` strategy) and asks whether it is excluded from weight
  decay by `exclude_from_weight_decay` (`_use_weight_decay`); Keras' own
  optimizers (Adam, Lamb, ...) do both through these private methods, and
  the Optimizer has no public form of either. `tupe_tf.training.Lamb` also
  overrides `Optimizer._apply_weight_decay` (the separate shrink of
  `apply`, disabled there because LAMB's decay is inside the trust ratio):
  the weight decay the base class takes and serializes has no public hook
  either.
"""

__all__ = [
    "attention_dropout_layer",
    "optimizer_variable_index",
    "uses_weight_decay",
]


def attention_dropout_layer(attention):
    """The attention-probability `Dropout` of a built
    `keras.layers.MultiHeadAttention` (rate `attention.dropout`, seeded by
    its `seed` argument)."""
    return attention._dropout_layer


def optimizer_variable_index(optimizer, variable):
    """The index of `variable` in the built `optimizer`'s variable list
    (and in the lists of `add_optimizer_variables`)."""
    return optimizer._get_variable_index(variable)


def uses_weight_decay(optimizer, variable):
    """False for a variable `optimizer.exclude_from_weight_decay` excluded."""
    return optimizer._use_weight_decay(variable)
