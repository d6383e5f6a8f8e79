"""Pre-trains a tiny `TupeMaskedLM` with `fit` on the shards' reader, on one
Keras backend.

Run by `test_backend_training.py` in a process whose `KERAS_BACKEND` is
fixed before Keras is imported:

    python tests/models/training_worker.py TRAIN_FILE VOCAB OUT.npz [MODE...]

`MODE` is `single` (default devices), `data_parallel` (JAX only:
`keras.distribution.DataParallel` over every CPU device), `shuffled` (the
training reader: shuffled, repeated) or `jit_compiled` (`single` with
`jit_compile=True`, on PyTorch `torch.compile`: minutes on CPU, so no test
runs it; its weights compare with `single`'s). Every mode starts from the
same NumPy weights, without dropout; `single` and `data_parallel` read the shard once
in file order with deterministic masks, so their per-step losses on two
backends or two device layouts differ only by float32 round-off. (The
training reader reshuffles on every new iterator, and `fit` on JAX and
PyTorch reads a first batch to build the model before it starts a new one,
so its batches differ between backends.) `OUT.npz` holds `<mode>/losses` (the
epoch's running mean after each step), `<mode>/before` and `<mode>/after`
(the loss on the first batches in file order),
`<mode>/weights_<i>` (`<mode>/initial_<i>` before training) and, for `data_parallel`, `<mode>/replicas` (the
largest difference between a variable's copies on the devices).
"""

import sys

import numpy as np

SEQ_LENGTH = 32
BATCH_SIZE = 8
STEPS = 12


def build(vocabulary_size, jit_compile="auto"):
    """The compiled masked LM, weights drawn with NumPy (backend-neutral);
    `jit_compile` as in `Model.compile`."""
    import keras

    import tupe_tf
    from tests.sizes import encoder_sizes
    from tupe_tf.training.optimization import create_optimizer
    from tupe_tf.utils.backend import assign_seeded_weights

    backbone = tupe_tf.TupeBackbone(
        vocabulary_size,
        max_sequence_length=64,
        **encoder_sizes(32),
        position_encoding="tupe-r",
        dropout=0.0,
    )
    model = tupe_tf.TupeMaskedLM(backbone, preprocessor=None)
    dummy = np.zeros((1, SEQ_LENGTH), "int32")
    model(
        {
            "token_ids": dummy,
            "segment_ids": dummy,
            "padding_mask": dummy + 1,
            "mask_positions": dummy[:, :5],
        }
    )
    assign_seeded_weights(model, seed=0, stddev=0.05)
    model.compile(
        optimizer=create_optimizer(
            model, num_train_steps=STEPS, learning_rate=3e-3, warmup_steps=2
        ),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        weighted_metrics=["sparse_categorical_accuracy"],
        jit_compile=jit_compile,
    )
    return model


def dataset(train_file, vocab_file, is_training):
    import data_pipeline

    return data_pipeline.pretraining_dataset(
        train_file,
        vocab_file,
        seq_length=SEQ_LENGTH,
        batch_size=BATCH_SIZE,
        is_training=is_training,
        deterministic=True,
        seed=0,
    )


def train(train_file, vocab_file, is_training=False, jit_compile="auto"):
    """`{"losses": per-step running mean loss, "weights_<i>": ...}`."""
    import keras

    with open(vocab_file) as f:
        vocabulary_size = sum(1 for _ in f)
    model = build(vocabulary_size, jit_compile)
    initial = [keras.ops.convert_to_numpy(v) for v in model.weights]
    # The loss on the first batches in file order, before and after.
    seen = dataset(train_file, vocab_file, is_training=False).take(STEPS)
    before = model.evaluate(seen, verbose=0, return_dict=True)["loss"]
    losses = []
    model.fit(
        dataset(train_file, vocab_file, is_training),
        steps_per_epoch=STEPS,
        epochs=1,
        verbose=0,
        callbacks=[
            keras.callbacks.LambdaCallback(
                on_train_batch_end=lambda _, logs: losses.append(logs["loss"])
            )
        ],
    )
    results = {
        "losses": np.array(losses, "float64"),
        "before": np.array(before),
        "after": np.array(
            model.evaluate(seen, verbose=0, return_dict=True)["loss"]
        ),
    }
    for i, variable in enumerate(model.weights):
        results[f"weights_{i}"] = keras.ops.convert_to_numpy(variable)
        results[f"initial_{i}"] = initial[i]
    return results, model


def largest_replica_difference(model):
    """The largest difference between two devices' copies of a weight."""
    largest = 0.0
    for variable in model.weights:
        shards = [np.asarray(s.data) for s in variable.value.addressable_shards]
        assert len(shards) > 1, f"{variable.path} is on one device"
        for shard in shards[1:]:
            largest = max(largest, float(np.abs(shard - shards[0]).max()))
    return largest


def run(train_file, vocab_file, modes):
    import keras

    results = {}
    for mode in modes:
        if mode == "data_parallel":
            devices = keras.distribution.list_devices("cpu")
            keras.distribution.set_distribution(
                keras.distribution.DataParallel(devices=devices)
            )
        trained, model = train(
            train_file,
            vocab_file,
            is_training=mode == "shuffled",
            jit_compile=True if mode == "jit_compiled" else "auto",
        )
        if mode == "data_parallel":
            trained["replicas"] = np.array(largest_replica_difference(model))
            trained["devices"] = np.array(len(devices))
            keras.distribution.set_distribution(None)
        results.update({f"{mode}/{k}": v for k, v in trained.items()})
    return results


def main(argv):
    import keras

    train_file, vocab_file, out = argv[:3]
    print(f"backend {keras.backend.backend()}", flush=True)
    np.savez(out, **run(train_file, vocab_file, argv[3:] or ["single"]))


if __name__ == "__main__":
    main(sys.argv[1:])
