"""Independent initial values for weights that share one initializer.

A Keras random initializer holds one seed, so every weight it initializes
gets the same values for the same shape (and shapes of one size share their
leading values): DIET-ABS's `P_Q` and `P_K`, TUPE's `U^Q` and `U^K`, or each
layer's Shaw et al. table would start equal, which no author's code does.
`with_seed_offset` gives each weight a copy whose seed is offset, and
`seed_of` hands a layer that builds its own initializers the seed to
offset. Unlike an unseeded copy (keras-hub's `clone_initializer`), neither
draws a seed from Keras' global random state, which would change every
later layer's initial weights under a fixed `keras.utils.set_random_seed`
and so unpair the options at a seed.

Example:

>>> import keras
>>> base = keras.initializers.TruncatedNormal(stddev=0.02, seed=7)
>>> with_seed_offset(base, 2).seed
9
"""

import keras


def seed_of(initializer):
    """The integer seed of a Keras initializer, or None (not random, or
    seeded by a `keras.random.SeedGenerator`)."""
    seed = getattr(keras.initializers.get(initializer), "seed", None)
    return seed if isinstance(seed, int) else None


def with_seed_offset(initializer, offset):
    """`initializer` with its integer seed plus `offset`.

    Args:
        initializer: a Keras initializer or identifier.
        offset: int. The weight's index among those sharing `initializer`;
            0 returns `initializer` itself.

    Returns:
        A Keras initializer. One without an integer seed (zeros, constants,
        one seeded by a `SeedGenerator`, which draws anew per call) is
        returned as it is.
    """
    initializer = keras.initializers.get(initializer)
    seed = seed_of(initializer)
    if offset == 0 or seed is None:
        return initializer
    config = dict(initializer.get_config(), seed=seed + offset)
    return initializer.__class__.from_config(config)
