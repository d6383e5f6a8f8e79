"""The encoder sizes of the small backbones tests build.

It imports no Keras, so a worker script can import it before its backend
is chosen.
"""


def encoder_sizes(hidden_dim=16, **overrides):
    """`TupeBackbone` size arguments: 2 layers of 2 heads, `hidden_dim` wide,
    a feed-forward twice as wide; `overrides` replace any of them.

    Example: `TupeBackbone(50, max_sequence_length=16, **encoder_sizes(32))`.
    """
    sizes = dict(num_layers=2, num_heads=2, hidden_dim=hidden_dim)
    sizes["intermediate_dim"] = 2 * hidden_dim
    return {**sizes, **overrides}
