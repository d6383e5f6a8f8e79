"""Gradient accumulation against one batch k times as large.

`weight_difference(...)` trains the tiny masked LM of a `PretrainConfig`
twice from the same initial weights on the same batches, once with
`gradient_accumulation_steps` and once without, and returns the largest
absolute weight difference after the updates. Run as a script
(`python -m tests.training.accumulation_worker`), it splits the CPU into 2
logical devices first and prints, as JSON, the difference of each case
under `MirroredStrategy` (`fit`, `fit` under `mixed_float16` and the
`strategy.run` loop of `tupe_tf.training.multi_worker`, the loop's against
`fit`'s larger batch: without accumulation both make the same updates, so
one run serves both; XLA is not among
them: under `MirroredStrategy` on logical CPU devices it fails as well
without accumulation, the variables of one device being read from the
other).
"""

import json

import numpy as np

from tests.sizes import encoder_sizes

VOCABULARY_SIZE, SEQ_LENGTH, PREDICTIONS = 40, 12, 3
BATCH, ACCUMULATION, UPDATES = 8, 4, 3


def _config(accumulation, **runtime):
    from tupe_tf.training import config as config_lib

    return config_lib.PretrainConfig(
        model_dir="/unused",
        seq_length=SEQ_LENGTH,
        max_predictions_per_seq=PREDICTIONS,
        global_batch_size=BATCH,
        gradient_accumulation_steps=accumulation,
        num_train_steps=10,
        # One layer: what accumulation sums does not depend on the depth,
        # and every layer adds to the train step's trace.
        model=config_lib.ModelConfig(
            **encoder_sizes(16, num_layers=1),
            max_sequence_length=16,
            dropout=0.0,
        ),
        optimizer=config_lib.OptimizerConfig(
            learning_rate=1e-2, warmup_steps=2
        ),
        runtime=config_lib.RuntimeConfig(**runtime),
    )


def _batches():
    """`UPDATES` masked-LM batches of `BATCH`, the reader's structure."""
    import tensorflow as tf

    rng = np.random.default_rng(0)
    shape = (UPDATES * BATCH, SEQ_LENGTH)
    x = {
        "token_ids": rng.integers(5, VOCABULARY_SIZE, shape).astype("int32"),
        "segment_ids": np.zeros(shape, "int32"),
        "padding_mask": np.ones(shape, "int32"),
        "mask_positions": np.stack(
            [rng.choice(SEQ_LENGTH, PREDICTIONS, replace=False)] * shape[0]
        ).astype("int32"),
    }
    y = rng.integers(5, VOCABULARY_SIZE, (shape[0], PREDICTIONS)).astype(
        "int32"
    )
    weights = rng.integers(0, 2, (shape[0], PREDICTIONS)).astype("float32")
    weights[:, 0] = 1.0
    return tf.data.Dataset.from_tensor_slices((x, y, weights)).batch(BATCH)


def _train(config, strategy, loop):
    import keras

    from tupe_tf.training import pretrain_model
    from tupe_tf.training.multi_worker import DistributedTrainingLoop

    keras.config.set_dtype_policy(config.runtime.mixed_precision)
    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = pretrain_model.build_masked_lm(config, VOCABULARY_SIZE)
        pretrain_model.compile_masked_lm(model, config)
    before = [np.asarray(w.numpy(), np.float64) for w in model.weights]
    if loop:
        DistributedTrainingLoop(model, strategy, verbose=0).fit(
            strategy.experimental_distribute_dataset(_batches()),
            epochs=1,
            steps_per_epoch=UPDATES,
        )
    else:
        model.fit(_batches(), epochs=1, steps_per_epoch=UPDATES, verbose=0)
    assert int(model.optimizer.iterations.numpy()) == UPDATES
    keras.config.set_dtype_policy("float32")
    after = [np.asarray(w.numpy(), np.float64) for w in model.weights]
    return before, after


def _largest_difference(weights, others):
    return float(max(np.abs(a - b).max() for a, b in zip(weights, others)))


def larger_batch(strategy, loop=False, **runtime):
    """`(w_0, w_1)`: the weights before and after `UPDATES` updates
    without accumulation."""
    return _train(_config(1, **runtime), strategy, loop)


def weight_difference(strategy, loop=False, whole_batches=None, **runtime):
    """`{"difference": largest |w_k - w_1|, "moved": largest |w_1 - w_0|}`
    after `UPDATES` updates of the tiny masked LM from the same initial
    weights `w_0`, `gradient_accumulation_steps=ACCUMULATION` (`w_k`)
    against 1 (`w_1`: `whole_batches`, `larger_batch`'s result, where given,
    else trained here)."""
    start, accumulated = _train(
        _config(ACCUMULATION, **runtime), strategy, loop
    )
    same_start, whole = whole_batches or larger_batch(strategy, loop, **runtime)
    assert _largest_difference(start, same_start) == 0
    return {
        "difference": _largest_difference(accumulated, whole),
        "moved": _largest_difference(whole, start),
    }


def main():
    from tupe_tf.training import distribution

    distribution.configure_logical_cpus(2)
    import tensorflow as tf

    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    whole_batches = larger_batch(strategy)
    results = {
        "fit": weight_difference(strategy, whole_batches=whole_batches),
        "fit_mixed_float16": weight_difference(
            strategy, mixed_precision="mixed_float16"
        ),
        "loop": weight_difference(
            strategy, loop=True, whole_batches=whole_batches
        ),
    }
    print(json.dumps(results))


if __name__ == "__main__":
    main()
