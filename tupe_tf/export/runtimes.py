"""ONNX Runtime and LiteRT exports of a preset's encoder or classifier.

Keras converts (`model.export(format="onnx")` through tf2onnx,
`format="litert"` through TensorFlow's LiteRT converter); this module
chooses the shapes, refuses what a converter cannot take before anything is
written, and runs the files (`load_runtime_model`).

Example:
```python
import tupe_tf.export
tupe_tf.export.export_preset("runs/sst2/preset", "out/sst2_onnx", "onnx")
model = tupe_tf.export.load_runtime_model("out/sst2_onnx")
model({"token_ids": ids, "segment_ids": segments, "padding_mask": mask})
```
"""

import os

import numpy as np

from tupe_tf.export import export_lib
from tupe_tf.export.runtime_model import INPUT_NAMES
from tupe_tf.export.runtime_model import RuntimeModel
from tupe_tf.export.runtime_model import runtime_input_signature
from tupe_tf.utils import extras
from tupe_tf.utils.errors import UserError

# format -> (file name, the modules it needs, the extra that installs them).
# LiteRT converts with TensorFlow's own converter and runs in ai-edge-litert.
RUNTIME_FORMATS = {
    "onnx": ("model.onnx", ("tf2onnx", "onnxruntime"), "onnx"),
    "litert": ("model.tflite", ("ai_edge_litert.interpreter",), "litert"),
}


def check_runtime_export(export_format, backbone, fold_positional_bias):
    """Refuses, before anything is written, what a format cannot take.

    Raises:
        UserError: a missing package (naming the extra to install), or an
            option the converter cannot take at a dynamic length.
    """
    _, modules, extra = RUNTIME_FORMATS[export_format]
    for module in modules:
        extras.import_extra(module, extra, f"--format={export_format}")
    # LiteRT's BATCH_MATMUL cannot prepare the outer product that keras-hub's
    # SinePositionEncoding traces at a dynamic length (a fixed length folds
    # the table into a constant).
    if (
        export_format == "litert"
        and backbone.position_encoding == "sinusoidal"
        and not fold_positional_bias
    ):
        raise UserError(
            "--format=litert cannot convert position_encoding='sinusoidal' "
            "at a dynamic length (LiteRT's BATCH_MATMUL fails on its table); "
            "export with --fold_positional_bias (a fixed --seq_length)."
        )


def export_runtime(
    preset,
    export_dir,
    export_format,
    seq_length=128,
    overwrite=False,
    fold_positional_bias=True,
):
    """Writes `model.onnx` or `model.tflite` for a preset.

    Inputs are int32 `token_ids`, `segment_ids` and `padding_mask`
    `[batch, seq]`; outputs float32 `sequence_output` and `pooled_output`
    (backbone and masked-LM presets) or `logits` and `probabilities`
    (classifier presets). The batch axis is dynamic. With
    `fold_positional_bias` the sequence axis is fixed to `seq_length` and
    the position bias is a constant (as the SavedModel's at that length);
    without it the sequence axis is dynamic (up to the preset's
    `max_sequence_length`) and the bias is computed at each call.

    Args:
        preset: a `tupe_tf.export.LoadedPreset`.
        export_dir: str. Output directory (written atomically): the model
            file and `assets.extra/tupe_tf_export.json`.
        export_format: str. `onnx` or `litert`.
        seq_length: int. The fixed length (with `fold_positional_bias`).
        overwrite: bool. Replace an existing `export_dir`.
        fold_positional_bias: bool. Fix the length and fold the bias.

    Example:
    ```python
    preset = tupe_tf.export.load_preset("runs/sst2/preset")
    export_runtime(preset, "out/sst2_litert", "litert", seq_length=128)
    ```
    """
    check_runtime_export(export_format, preset.backbone, fold_positional_bias)
    file_name = RUNTIME_FORMATS[export_format][0]
    fixed_length = seq_length if fold_positional_bias else None
    with (
        export_lib.atomic_export_dir(export_dir, overwrite) as tmp_dir,
        export_lib.folded_positional_bias(
            preset.backbone, [seq_length] if fold_positional_bias else []
        ),
    ):
        model = RuntimeModel(preset.backbone, preset.classifier)
        model.build_for_export(seq_length)
        model.export(
            os.path.join(tmp_dir, file_name),
            format=export_format,
            input_signature=[runtime_input_signature(fixed_length)],
            verbose=False,
        )
        export_lib.write_export_metadata(
            tmp_dir,
            format=export_format,
            file=file_name,
            seq_length=fixed_length,
            kind=preset.kind,
            position_encoding=preset.backbone.position_encoding,
            max_sequence_length=preset.backbone.max_sequence_length,
        )


class _OnnxModel:
    def __init__(self, path):
        import onnxruntime

        self.session = onnxruntime.InferenceSession(
            path, providers=["CPUExecutionProvider"]
        )
        self.output_names = [o.name for o in self.session.get_outputs()]

    def __call__(self, inputs):
        outputs = self.session.run(None, inputs)
        return dict(zip(self.output_names, outputs))


class _LiteRTModel:
    def __init__(self, path):
        from ai_edge_litert.interpreter import Interpreter

        # As many threads as cores, as TensorFlow and ONNX Runtime use.
        interpreter = Interpreter(model_path=path, num_threads=os.cpu_count())
        self.runner = interpreter.get_signature_runner()

    def __call__(self, inputs):
        # The signature runner resizes the dynamic axes to the inputs.
        return self.runner(**inputs)


def load_runtime_model(export_dir):
    """The exported model in its runtime: `inputs -> {name: array}`.

    Args:
        export_dir: str. A directory written with `--format=onnx` (run by
            ONNX Runtime, CPU) or `--format=litert` (the LiteRT
            interpreter).

    Returns:
        A callable on a dict of int32 `token_ids`, `segment_ids` and
        `padding_mask` arrays, returning a dict of NumPy outputs.

    Example:
    ```python
    model = load_runtime_model("out/encoder_onnx")
    outputs = model({"token_ids": ids, "segment_ids": segments,
                     "padding_mask": mask})
    outputs["pooled_output"]
    ```
    """
    metadata = export_lib.read_export_metadata(export_dir)
    if metadata is None or metadata.get("format") not in RUNTIME_FORMATS:
        raise UserError(
            f"{export_dir!r} is not an ONNX or LiteRT export of tupe-tf "
            f"(no {export_lib.EXPORT_METADATA_FILE} naming one)."
        )
    path = os.path.join(export_dir, metadata["file"])
    model = (_OnnxModel if metadata["format"] == "onnx" else _LiteRTModel)(path)

    def call(inputs):
        return model(
            {name: np.asarray(inputs[name], np.int32) for name in INPUT_NAMES}
        )

    return call
