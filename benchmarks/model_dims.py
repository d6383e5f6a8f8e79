"""The model-size flags the encoder benchmarks share.

Each benchmark names the size it is about, a row of
`MODEL_SIZES`, which gives the defaults of `--num_layers`,
`--hidden_dim`, `--num_heads` and `--intermediate_dim`;
`python benchmarks/<name>.py` puts this directory on `sys.path`.

Example:

>>> define_model_dims("small", seq_length=128, batch_size=32)  # doctest: +SKIP
>>> keras_hub.models.BertBackbone(**backbone_dims())  # doctest: +SKIP
"""

from absl import flags

from tupe_tf.utils.backbone_options import MODEL_SIZES

FLAGS = flags.FLAGS
_HELP = {
    "num_layers": "Transformer layers",
    "hidden_dim": "Hidden size",
    "num_heads": "Attention heads",
    "intermediate_dim": "Feed-forward width",
}


def model_sizes():
    """`MODEL_SIZES` (from `tupe_tf.utils.backbone_options`, which imports
    neither TensorFlow nor Keras: the JAX benchmarks run without them)."""
    return MODEL_SIZES


def define_model_dims(
    model_size, seq_length, batch_size=None, vocabulary_size=30522
):
    """Defines `--num_layers`, `--hidden_dim`, `--num_heads` and
    `--intermediate_dim` (defaults: the `MODEL_SIZES` row `model_size`),
    `--seq_length`, `--batch_size` (unless None) and `--vocabulary_size`
    (unless None)."""
    for dim, value in model_sizes()[model_size].items():
        flags.DEFINE_integer(
            dim, value, f"{_HELP[dim]} ({model_size}: {value}).", lower_bound=1
        )
    flags.DEFINE_integer("seq_length", seq_length, "Sequence length.")
    if batch_size is not None:
        flags.DEFINE_integer("batch_size", batch_size, "Batch size.")
    if vocabulary_size is not None:
        flags.DEFINE_integer(
            "vocabulary_size", vocabulary_size, "Vocabulary size."
        )


def model_dims():
    """The four dims of the flags, as `MODEL_SIZES` rows hold them."""
    return {dim: FLAGS[dim].value for dim in _HELP}


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
    text = (
        f"layers={FLAGS.num_layers} hidden={FLAGS.hidden_dim} "
        f"heads={FLAGS.num_heads} ffn={FLAGS.intermediate_dim} "
        f"seq={FLAGS.seq_length}"
    )
    if "batch_size" in FLAGS:
        text += f" batch={FLAGS.batch_size}"
    return text
