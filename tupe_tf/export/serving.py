"""Serving SavedModel: raw strings in, float32 outputs out, tokenization inside."""

import re
import tempfile

import keras
import tensorflow as tf

from tupe_tf.export import export_lib
from tupe_tf.export.hub_preprocessor import text_packer_from_tokenizer
from tupe_tf.export.saved_model_root import SavedModelRoot
from tupe_tf.utils.backend import require_tensorflow
from tupe_tf.utils.errors import UserError

DEFAULT_TEXT_FIELDS = ("text",)
_FIELD_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


def check_text_fields(text_fields):
    """Validates the names of the string inputs; returns them as a tuple."""
    text_fields = tuple(text_fields or DEFAULT_TEXT_FIELDS)
    if not 1 <= len(text_fields) <= 2:
        raise UserError(
            "`text_fields` takes one name (single texts) or two (pairs). "
            f"Received: {text_fields}"
        )
    for name in text_fields:
        if not _FIELD_NAME.match(name):
            raise UserError(
                f"`text_fields` names must be identifiers. Received: {name!r}"
            )
    if len(set(text_fields)) != len(text_fields):
        raise UserError(f"`text_fields` repeat a name: {text_fields}")
    return text_fields


def _classifier_head(classifier):
    """`inputs -> (logits, probabilities)` of a keras-hub TextClassifier.

    The logits are the final dense layer's pre-activation whatever the
    classifier's `activation`; probabilities are their softmax (sigmoid for
    one output unit).
    """
    output_dense = classifier.output_dense
    features = keras.Model(classifier.input, output_dense.input)

    def head(inputs):
        hidden = features(inputs, training=False)
        logits = tf.matmul(hidden, output_dense.kernel) + output_dense.bias
        logits = tf.cast(logits, tf.float32)
        if logits.shape[-1] == 1:
            probabilities = tf.sigmoid(logits)
        else:
            probabilities = tf.nn.softmax(logits, axis=-1)
        return {"logits": logits, "probabilities": probabilities}

    return head


def _backbone_head(backbone):
    def head(inputs):
        outputs = backbone(inputs, training=False)
        return {
            "pooled_output": tf.cast(outputs["pooled_output"], tf.float32),
            "sequence_output": tf.cast(outputs["sequence_output"], tf.float32),
        }

    return head


def build_serving_module(preset, packer, seq_length=128, text_fields=None):
    """The object saved by `export_serving`.

    Args:
        preset: a `tupe_tf.export.LoadedPreset`.
        packer: a `BertTextPacker` configured like the preset's tokenizer.
        seq_length: int. Packed length.
        text_fields: one or two input names.

    Returns:
        `(root, signatures)`: a trackable with `serve(inputs)` (a dict of
        `[batch]` string tensors keyed by `text_fields`) and `variables`,
        and the `serving_default` signature taking the fields as named
        string inputs (the dict's TensorSpec names). Build and save them
        inside `export_lib.folded_positional_bias(backbone, [seq_length])`.
    """
    require_tensorflow("SavedModel serving export")
    text_fields = check_text_fields(text_fields)
    if preset.classifier is not None:
        head = _classifier_head(preset.classifier)
        model = preset.classifier
    else:
        head = _backbone_head(preset.backbone)
        model = preset.backbone

    def serve_dict(inputs):
        packed = packer.preprocess(
            [inputs[name] for name in text_fields], seq_length
        )
        # Static length, so the backbone uses the folded position bias.
        packed = {
            name: tf.ensure_shape(t, [None, seq_length])
            for name, t in packed.items()
        }
        return head(
            {
                "token_ids": packed["input_word_ids"],
                "segment_ids": packed["input_type_ids"],
                "padding_mask": packed["input_mask"],
            }
        )

    specs = {
        name: tf.TensorSpec([None], tf.string, name=name)
        for name in text_fields
    }
    root = SavedModelRoot()
    root.packer = packer
    root.variables = [v.value for v in model.variables]
    root.trainable_variables = []
    root.regularization_losses = []
    # No tensor-dependent Python control flow: AutoGraph's source
    # conversion (slower than the trace) is skipped.
    serve = tf.function(serve_dict, input_signature=[specs], autograph=False)
    root.serve = serve
    return root, {"serving_default": serve}


def export_serving(
    preset,
    export_dir,
    seq_length=128,
    text_fields=None,
    overwrite=False,
    fold_positional_bias=True,
):
    """Writes a serving SavedModel that takes raw strings.

    `serving_default` takes one `[batch]` string input per name in
    `text_fields` (e.g. `text`, or `premise` and `hypothesis` for pairs),
    tokenizes and packs them as the preset's preprocessor (round-robin
    truncation to `seq_length`) and returns float32 `logits` and
    `probabilities` for a classifier preset, `pooled_output` and
    `sequence_output` for a backbone preset.

    Args:
        preset: a `tupe_tf.export.LoadedPreset`.
        export_dir: str. Output directory (written atomically).
        seq_length: int. Packed length.
        text_fields: one or two input names; defaults to `("text",)`.
        overwrite: bool. Replace an existing `export_dir`.
        fold_positional_bias: bool. Fold the position bias at `seq_length`.

    Example:
    ```python
    preset = tupe_tf.export.load_preset("runs/mnli/preset")
    export_serving(preset, "out/mnli", text_fields=("premise", "hypothesis"))
    # saved_model_cli run --dir out/mnli --tag_set serve \
    #   --signature_def serving_default \
    #   --input_exprs 'premise=["a"];hypothesis=["b"]'
    ```
    """
    require_tensorflow("SavedModel serving export")
    text_fields = check_text_fields(text_fields)
    with tempfile.TemporaryDirectory() as vocab_dir:
        packer = text_packer_from_tokenizer(preset.tokenizer, vocab_dir)
        folded = [seq_length] if fold_positional_bias else []
        with (
            export_lib.atomic_export_dir(export_dir, overwrite) as tmp_dir,
            export_lib.folded_positional_bias(preset.backbone, folded),
        ):
            root, signatures = build_serving_module(
                preset, packer, seq_length, text_fields
            )
            tf.saved_model.save(root, tmp_dir, signatures=signatures)
            export_lib.write_export_metadata(
                tmp_dir,
                format="serving",
                seq_length=seq_length,
                kind=preset.kind,
                text_fields=list(text_fields),
                position_encoding=preset.backbone.position_encoding,
            )
