"""Saves and loads tiny `TupeMaskedLM` presets on one Keras backend.

Run by `test_cross_backend_presets.py` in a process whose `KERAS_BACKEND`
is fixed before Keras is imported (backends cannot share a process):

    python tests/models/preset_worker.py save DIR load SRC OUT.npz ...

`save DIR`: one preset per case under `DIR/<case>`, random weights, and the
saving model's outputs in `DIR/outputs.npz`. `load SRC OUT.npz`: every
case of `SRC` through `keras_hub.models.MaskedLM.from_preset`, its outputs
in `OUT.npz`. A case that fails is recorded as `<case>/error` (its
traceback), so one option cannot hide the others' results.
"""

import os
import sys
import traceback

import numpy as np

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [
    f"w{i}" for i in range(27)
]
LENGTH = 12


def cases():
    """Case name -> `TupeBackbone` options: every position encoding with
    the defaults, per-head segments and a RoPE length scaling."""
    import tupe_tf

    options = {name: {} for name in tupe_tf.POSITION_ENCODINGS}
    options["tupe-r_per-head"] = dict(segment_encoding="per-head")
    options["rope_yarn"] = dict(
        rope_scaling="yarn", rope_scaling_factor=2.0, rope_trained_length=8
    )
    return {
        name: {"position_encoding": name.split("_")[0], **kwargs}
        for name, kwargs in options.items()
    }


def inputs():
    """Two rows, the second padded, both segments, four masked slots."""
    rng = np.random.default_rng(0)
    padding_mask = np.ones((2, LENGTH), "int32")
    padding_mask[1, 8:] = 0
    segment_ids = np.zeros((2, LENGTH), "int32")
    segment_ids[:, 5:] = 1
    return {
        "token_ids": rng.integers(5, len(VOCAB), (2, LENGTH)).astype("int32")
        * padding_mask,
        "segment_ids": segment_ids * padding_mask,
        "padding_mask": padding_mask,
        "mask_positions": np.array([[1, 3, 6, 10], [2, 4, 6, 7]], "int32"),
    }


def outputs(masked_lm):
    """`sequence_output` and masked-LM logits on `inputs()`, as NumPy."""
    import keras

    x = inputs()
    backbone_x = {k: v for k, v in x.items() if k != "mask_positions"}
    return {
        "sequence_output": keras.ops.convert_to_numpy(
            masked_lm.backbone(backbone_x)["sequence_output"]
        ),
        "logits": keras.ops.convert_to_numpy(masked_lm(x)),
    }


def build(options, seed):
    """A `TupeMaskedLM` with its preprocessor, every weight random."""
    import tupe_tf
    from tests.sizes import encoder_sizes

    tokenizer = tupe_tf.TupeTokenizer(vocabulary=VOCAB, lowercase=True)
    backbone = tupe_tf.TupeBackbone(
        vocabulary_size=len(VOCAB),
        max_sequence_length=32,
        **encoder_sizes(32),
        **options,
    )
    masked_lm = tupe_tf.TupeMaskedLM(
        backbone,
        preprocessor=tupe_tf.TupeMaskedLMPreprocessor(
            tokenizer, sequence_length=LENGTH
        ),
    )
    masked_lm(inputs())
    rng = np.random.default_rng(seed)
    for variable in masked_lm.weights:
        scale = 0.3 if "gamma" not in variable.path else 0.1
        offset = 1.0 if "gamma" in variable.path else 0.0
        value = offset + rng.normal(0, scale, variable.shape)
        variable.assign(value.astype(variable.dtype))
    return masked_lm


def _each_case(fn):
    """`{f"{case}/{key}": array}` of `fn(case, options)` for every case."""
    results = {}
    for seed, (case, options) in enumerate(cases().items()):
        try:
            for key, value in fn(case, options, seed).items():
                results[f"{case}/{key}"] = value
        except Exception:  # noqa: BLE001 - reported to the test per case
            results[f"{case}/error"] = np.array(traceback.format_exc())
    return results


def save(directory):
    def one(case, options, seed):
        masked_lm = build(options, seed)
        masked_lm.save_to_preset(os.path.join(directory, case))
        return outputs(masked_lm)

    os.makedirs(directory, exist_ok=True)
    np.savez(os.path.join(directory, "outputs.npz"), **_each_case(one))


def load(source, path):
    import keras_hub

    def one(case, options, seed):
        preset = os.path.join(source, case)
        masked_lm = keras_hub.models.MaskedLM.from_preset(preset)
        config = masked_lm.backbone.get_config()
        described = {k: config[k] for k in sorted(options)}
        return {
            **outputs(masked_lm),
            "class": np.array(type(masked_lm).__name__),
            "options": np.array(repr(described)),
        }

    np.savez(path, **_each_case(one))


def main(argv):
    import keras

    print(f"backend {keras.backend.backend()}", flush=True)
    while argv:
        if argv[0] == "save":
            save(argv[1])
            argv = argv[2:]
        elif argv[0] == "load":
            load(argv[1], argv[2])
            argv = argv[3:]
        else:
            raise SystemExit(f"unknown command {argv[0]!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
