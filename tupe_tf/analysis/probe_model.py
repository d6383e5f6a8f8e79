"""The probe models: a `TupeBackbone` and a small head, trained with `fit`.

Every task reads its answers with keras-hub's `MaskedLMHead` (as
`BertMaskedLM` does) at `mask_positions`: each `[MASK]` over the copy
pool's tokens (`copy`) or the ten digits (`passkey`), the marker `A` over
two classes (`order`, `distance`).

Runs with one seed share their initial weights: every weight a variant
shares with `nope` (the token and segment embeddings, the transformer
layers, the pooler, the head) starts from the value it has in the `nope`
model of that seed, whatever the variant's own position weights drew from
the random stream before it (`shared_start`).

Example:

>>> model = build_probe_model("order", dict(vocabulary_size=100,
...     num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32,
...     position_encoding="rope"))  # doctest: +SKIP
"""

import functools
import warnings

import keras
import numpy as np

from tupe_tf.analysis.probe_tasks import COPY_POOL_SIZE
from tupe_tf.models.position_encodings import bert_initializer
from tupe_tf.models.tupe_backbone import TupeBackbone
from tupe_tf.training import optimization

BACKBONE_INPUTS = ("token_ids", "segment_ids", "padding_mask")
REFERENCE_VARIANT = {"position_encoding": "nope"}


def _int_input(name):
    return keras.Input(shape=(None,), dtype="int32", name=name)


def _masked_head(classes, name):
    import keras_hub

    return keras_hub.layers.MaskedLMHead(
        vocabulary_size=classes,
        intermediate_activation="gelu",
        kernel_initializer=bert_initializer(),
        name=name,
    )


def build_probe_model(task, backbone_arguments, copy_classes=COPY_POOL_SIZE):
    """A functional model `inputs -> logits` for `task`.

    Args:
        task: one of `probe_tasks.TASKS`.
        backbone_arguments: `TupeBackbone` keyword arguments.
        copy_classes: the size of `copy`'s token pool.

    Returns:
        A `keras.Model`; its inputs are the backbone's, plus
        `mask_positions`; its logits are `[batch, masks, copy_classes]`
        (copy), `[batch, 5, 10]` (passkey) or `[batch, 1, 2]`.
    """
    backbone = TupeBackbone(**backbone_arguments)
    inputs = {name: _int_input(name) for name in BACKBONE_INPUTS}
    outputs = backbone(inputs)
    inputs["mask_positions"] = _int_input("mask_positions")
    classes = {"copy": copy_classes, "passkey": 10}.get(task, 2)
    logits = _masked_head(classes, f"{task}_head")(
        outputs["sequence_output"], mask_positions=inputs["mask_positions"]
    )
    return keras.Model(inputs, logits, name=f"{task}_probe")


@functools.lru_cache(maxsize=2)
def _reference_values(task, seed, frozen_arguments, copy_classes):
    keras.utils.set_random_seed(seed)
    reference = build_probe_model(
        task, {**dict(frozen_arguments), **REFERENCE_VARIANT}, copy_classes
    )
    values = {v.path: np.asarray(v.numpy()) for v in reference.weights}
    keras.backend.clear_session()
    return values


def shared_start(
    task, seed, dims, variant_options, copy_classes=COPY_POOL_SIZE
):
    """The probe model of a variant, its shared weights set as `nope`'s.

    Args:
        task: one of `probe_tasks.TASKS`.
        seed: int; `keras.utils.set_random_seed(seed)` precedes both builds.
        dims: the backbone arguments every variant shares (sizes, dropout,
            `max_sequence_length`).
        variant_options: the variant's own options (`study_config.VARIANTS`).
        copy_classes: the size of `copy`'s token pool.

    Returns:
        `(model, shared)`: the model and the paths of the weights set from
        the `nope` model of `seed`.
    """
    reference = _reference_values(
        task, seed, tuple(sorted(dims.items())), copy_classes
    )
    keras.utils.set_random_seed(seed)
    model = build_probe_model(task, {**dims, **variant_options}, copy_classes)
    shared = []
    for variable in model.weights:
        value = reference.get(variable.path)
        if value is not None and value.shape == tuple(variable.shape):
            variable.assign(value)
            shared.append(variable.path)
    return model, shared


def train_probe(model, examples, batch_size, optimizer, jit_compile=False):
    """One epoch of `fit` over `examples`, in their order (no shuffling:
    every variant of a seed sees the same batches), with pre-training's
    optimizer (`optimizer`: a `tupe_tf.training.OptimizerConfig`).

    Returns:
        The training loss, averaged over the steps (Keras's epoch mean).
    """
    steps = len(examples.labels) // batch_size
    model.compile(
        optimizer=optimization.optimizer_from_config(
            model, optimizer, steps, optimizer.learning_rate
        ),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=jit_compile,
    )
    with warnings.catch_warnings():
        # The heads that read masks leave the backbone's pooler unused.
        warnings.filterwarnings("ignore", "Gradients do not exist")
        history = model.fit(
            examples.inputs,
            examples.labels,
            sample_weight=examples.weights,
            batch_size=batch_size,
            epochs=1,
            shuffle=False,
            verbose=0,
        )
    return float(history.history["loss"][-1])


def prediction_function(model):
    """`inputs -> argmax of the logits`, one graph for every length."""
    import tensorflow as tf

    @tf.function(reduce_retracing=True, autograph=False)
    def predict(inputs):
        return tf.argmax(model(inputs, training=False), axis=-1)

    return predict


def eval_batch_size(length):
    """Rows per evaluation batch: about 2,048 tokens (copy's logits are
    `[rows, masks, vocabulary]`)."""
    return max(8, 2048 // length)


def accuracies(predict, examples):
    """`(accuracy, rows_right)`: the weighted share of right answers, and
    the share of rows right everywhere (the whole key for `passkey`)."""
    size = eval_batch_size(examples.inputs["token_ids"].shape[1])
    total = len(examples.labels)
    predicted = np.concatenate(
        [
            np.asarray(
                predict(
                    {k: v[i : i + size] for k, v in examples.inputs.items()}
                )
            )
            for i in range(0, total, size)
        ]
    )
    right = predicted == examples.labels
    weights = examples.weights
    weights = np.ones(right.shape) if weights is None else weights
    weights = weights.astype("float64")
    accuracy = float((right * weights).sum() / weights.sum())
    if right.ndim == 1:
        return accuracy, accuracy
    rows = np.all(right | (weights == 0), axis=1)
    return accuracy, float(rows.mean())
