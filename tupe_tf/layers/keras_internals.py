"""The one place tupe-tf uses Keras internals (`keras.src`, private members).

Keras 3.15 exports none of these; each is used for the reason given, and
every other module reaches them through here, so a Keras upgrade that moves
one breaks exactly this module (setup.py accepts only the Keras minor
release the tests run on).

- `flatten_layers`: every layer nested in a model, Keras' own walk
  (`Layer._flatten_layers`); Keras 3 has no public recursive list of a
  model's layers. The weight-decay exclusions and the length-bound tables
  of context extension look for layers by type there.
- `compute_loss`, `loss_tracker`, `unscale_loss_for_distribution`: the
  pieces of `Model.train_step` (TensorFlow backend) that the
  gradient-accumulation step runs per micro-batch, so that its loss and its
  "loss" metric are those of `fit`.
"""

from keras.src.losses.loss import unscale_loss_for_distribution

__all__ = [
    "compute_loss",
    "flatten_layers",
    "loss_tracker",
    "unscale_loss_for_distribution",
]


def flatten_layers(model, include_self=True):
    """`model` (with `include_self`) and every layer nested in it."""
    return model._flatten_layers(include_self=include_self, recursive=True)


def compute_loss(model, x, y, y_pred, sample_weight):
    """The training loss as `Model.train_step` computes it (the compiled
    losses and `model.losses`, whatever `compute_loss` signature the model
    overrides it with)."""
    return model._compute_loss(
        x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=True
    )


def loss_tracker(model):
    """The `Mean` metric behind `fit`'s "loss" log of a compiled model."""
    return model._loss_tracker
