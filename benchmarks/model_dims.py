"""The model-size flags the encoder benchmarks share.

`--model_size` names a row of `tupe_tf.training.MODEL_SIZES`;
`--num_layers`, `--hidden_dim`, `--num_heads` and `--intermediate_dim`
override it, as in the training configs. Each benchmark passes the size it
is about; `python benchmarks/<name>.py` puts this directory on `sys.path`.

Example:

>>> define_model_dims("small", seq_length=128, batch_size=32)  # doctest: +SKIP
>>> keras_hub.models.BertBackbone(**backbone_dims())  # doctest: +SKIP
"""

import functools
import importlib.util
import os

from absl import flags

import tupe_tf

FLAGS = flags.FLAGS
_DIMS = ("num_layers", "hidden_dim", "num_heads", "intermediate_dim")


@functools.cache
def model_sizes():
    """`MODEL_SIZES`, read from `tupe_tf/training/config.py` alone.

    The `tupe_tf.training` package imports TensorFlow, which the machine of
    the JAX benchmarks (fused_attention.py) does not have; its config module
    does not.
    """
    path = os.path.join(
        os.path.dirname(tupe_tf.__file__), "training", "config.py"
    )
    spec = importlib.util.spec_from_file_location("_training_config", path)
    config = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(config)
    return config.MODEL_SIZES


def define_model_dims(
    model_size, seq_length, batch_size=None, vocabulary_size=30522
):
    """Defines `--model_size`, its four dim overrides, `--seq_length`,
    `--batch_size` (unless None) and `--vocabulary_size` (unless None)."""
    flags.DEFINE_enum(
        "model_size",
        model_size,
        list(model_sizes()),
        "BERT dimensions: a row of tupe_tf.training.MODEL_SIZES.",
    )
    for dim in _DIMS:
        flags.DEFINE_integer(
            dim, None, "Overrides --model_size's value.", lower_bound=1
        )
    flags.DEFINE_integer("seq_length", seq_length, "Sequence length.")
    if batch_size is not None:
        flags.DEFINE_integer("batch_size", batch_size, "Batch size.")
    if vocabulary_size is not None:
        flags.DEFINE_integer(
            "vocabulary_size", vocabulary_size, "Vocabulary size."
        )


def model_dims():
    """The four dims: `--model_size`'s row with the flags' overrides."""
    dims = dict(model_sizes()[FLAGS.model_size])
    for dim in _DIMS:
        if FLAGS[dim].value is not None:
            dims[dim] = FLAGS[dim].value
    return dims


def backbone_dims(max_sequence_length=None):
    """Keyword arguments of a BERT backbone of the flags' dims.

    `max_sequence_length` defaults to `max(512, --seq_length)`, BERT's
    position table.
    """
    if max_sequence_length is None:
        max_sequence_length = max(512, FLAGS.seq_length)
    return dict(
        vocabulary_size=FLAGS.vocabulary_size,
        max_sequence_length=max_sequence_length,
        **model_dims(),
    )


def describe_dims():
    """'layers=4 hidden=512 heads=8 ffn=2048 seq=128 [batch=32]'."""
    dims = model_dims()
    text = (
        f"layers={dims['num_layers']} "
        f"hidden={dims['hidden_dim']} heads={dims['num_heads']} "
        f"ffn={dims['intermediate_dim']} seq={FLAGS.seq_length}"
    )
    if "batch_size" in FLAGS:
        text += f" batch={FLAGS.batch_size}"
    return text
