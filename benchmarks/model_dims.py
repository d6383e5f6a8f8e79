"""The model-size flags the encoder benchmarks share.

Each benchmark defines them with its own defaults (the size it is about);
`python benchmarks/<name>.py` puts this directory on `sys.path`.

Example:

>>> define_model_dims(num_layers=4, hidden_dim=512, num_heads=8,
...     intermediate_dim=2048, seq_length=128, batch_size=32,
...     size="BERT-small")  # doctest: +SKIP
"""

from absl import flags


def define_model_dims(
    num_layers,
    hidden_dim,
    num_heads,
    intermediate_dim,
    seq_length,
    batch_size,
    size,
    vocabulary_size=30522,
):
    """Defines `--num_layers` ... `--vocabulary_size`; `size` names the
    defaults in the help texts (e.g. "BERT-base")."""
    flags.DEFINE_integer(
        "num_layers", num_layers, f"Transformer layers ({size}: {num_layers})."
    )
    flags.DEFINE_integer(
        "hidden_dim", hidden_dim, f"Hidden size ({size}: {hidden_dim})."
    )
    flags.DEFINE_integer(
        "num_heads", num_heads, f"Attention heads ({size}: {num_heads})."
    )
    flags.DEFINE_integer(
        "intermediate_dim", intermediate_dim, "Feedforward width."
    )
    flags.DEFINE_integer("seq_length", seq_length, "Sequence length.")
    flags.DEFINE_integer("batch_size", batch_size, "Batch size.")
    flags.DEFINE_integer("vocabulary_size", vocabulary_size, "Vocabulary size.")
