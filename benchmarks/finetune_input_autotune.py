r"""Fine-tuning step time with and without tf.data autotuning (one process).

Probes the bimodal fine-tuning step time (docs/benchmarks.md, "Fine-tuning
step"): one fresh process per call fits 100 steps of `TupeTextClassifier`
on cached random batches (batch 32, length 64) fed through a `tf.data`
pipeline in one of four modes, and prints the wall and process-CPU
milliseconds per step. The mode holds for a whole process, so compare modes
over several processes each:

  for r in 1 2 3 4; do for m in autotune noautotune; do
    python benchmarks/finetune_input_autotune.py PRESET_DIR $m; done; done

Modes: `autotune` (prefetch(AUTOTUNE), tf.data defaults), `noprefetch`
(defaults, no prefetch), `noautotune` (prefetch(2), `autotune.enabled=False`),
`tensors` (`train_on_batch` on eager batches, no iterator in the step).
"""

import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import tupe_tf  # noqa: E402
from data_pipeline import dataset_options  # noqa: E402

MODES = ("autotune", "noprefetch", "noautotune", "tensors")


def main(preset, mode, batch=32, length=64, steps=100):
    if mode not in MODES:
        raise SystemExit(f"mode must be one of {MODES}, got {mode!r}")
    rng = np.random.default_rng(0)
    examples = batch * 20
    features = {
        "token_ids": rng.integers(5, 8000, (examples, length)).astype("int32"),
        "segment_ids": np.zeros((examples, length), "int32"),
        "padding_mask": np.ones((examples, length), bool),
    }
    labels = rng.integers(0, 2, (examples,))
    dataset = (
        tf.data.Dataset.from_tensor_slices((features, labels))
        .cache()
        .shuffle(examples)
        .batch(batch)
        .repeat(steps * batch // examples)
    )
    if mode == "autotune":
        dataset = dataset.prefetch(tf.data.AUTOTUNE)
    elif mode == "noautotune":
        dataset = dataset_options.without_autotuning(dataset.prefetch(2))
    backbone = tupe_tf.TupeBackbone.from_preset(preset)
    model = tupe_tf.TupeTextClassifier(
        backbone, num_classes=2, preprocessor=None
    )
    model.compile(
        optimizer="adamw",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    model.fit(dataset.take(3), verbose=0)  # compile outside the timing
    start, cpu = time.time(), time.process_time()
    if mode == "tensors":
        batches = list(dataset.take(20))
        start, cpu = time.time(), time.process_time()
        for step in range(steps):
            model.train_on_batch(*batches[step % len(batches)])
    else:
        model.fit(dataset, verbose=0)
    wall_ms = (time.time() - start) / steps * 1000
    cpu_ms = (time.process_time() - cpu) / steps * 1000
    print(f"{mode} ms {wall_ms:.1f} cpu {cpu_ms:.1f}", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:3])
