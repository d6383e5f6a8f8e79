"""Plain NumPy re-implementations of the SPEC formulas, for the tests.

Written from ../shared/SPEC.md independently of the package code (the T5
bucket function included), so a test compares two implementations.
"""

import math

import numpy as np


def layer_norm(x, gamma, beta, epsilon):
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + epsilon) * gamma + beta


def softmax(x, axis=-1):
    x = x - x.max(axis=axis, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)


def gelu_tanh(x):
    return (
        0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    )


def gelu_erf(x):
    """The exact GELU, `x * Phi(x)`."""
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def t5_bucket(relative_position, num_buckets=32, max_distance=128):
    """T5 bidirectional bucket of one `j - i`, scalar Python."""
    half = num_buckets // 2
    bucket = half if relative_position > 0 else 0
    distance = abs(relative_position)
    exact = half // 2
    if distance < exact:
        return bucket + distance
    large = exact + int(
        math.log(distance / exact)
        / math.log(max_distance / exact)
        * (half - exact)
    )
    return bucket + min(large, half - 1)


def untied_correlation(
    table, ln_gamma, ln_beta, uq, bq, uk, bk, num_heads, scale, epsilon=1e-5
):
    """`scale * (LN(p_a) U^Q + b^Q)_h . (LN(p_b) U^K + b^K)_h` for all rows."""
    p = layer_norm(table, ln_gamma, ln_beta, epsilon)
    rows, hidden = p.shape
    q = (p @ uq + bq).reshape(rows, num_heads, hidden // num_heads)
    k = (p @ uk + bk).reshape(rows, num_heads, hidden // num_heads)
    return np.einsum("ahd,bhd->hab", q, k) * scale


def tupe_bias(
    weights,
    n,
    num_heads,
    untie_cls,
    relative_table=None,
    num_buckets=32,
    max_distance=128,
):
    """TUPE bias `(H, n, n)`: Eq. 9 reset on `v (+ b)`, table of N+1 rows."""
    hidden = weights["table"].shape[1]
    d = hidden // num_heads
    full = untied_correlation(
        weights["table"],
        weights["ln_gamma"],
        weights["ln_beta"],
        weights["uq"],
        weights["bq"],
        weights["uk"],
        weights["bk"],
        num_heads,
        1 / math.sqrt(2 * d),
    )
    offset = 1 if untie_cls else 0
    v = full[:, offset : offset + n, offset : offset + n].copy()
    if relative_table is not None:
        for i in range(n):
            for j in range(n):
                bucket = t5_bucket(j - i, num_buckets, max_distance)
                v[:, i, j] += relative_table[bucket, :]
    if untie_cls:
        theta1, theta2 = full[:, 0, 0], full[:, 1, 1]
        v[:, 1:, 0] = theta2[:, None]
        v[:, 0, :] = theta1[:, None]
    return v


def attention_probabilities(
    x,
    wq,
    bq,
    wk,
    bk,
    scale,
    bias,
    key_mask,
    query_offset=None,
    key_offset=None,
    rope_wavelength=None,
    shaw_table=None,
):
    """softmax_j(c q.k + beta) with masked keys excluded; `(B, H, n, n)`.

    With `rope_wavelength`, the projected q and k are rotated (RoPE); with
    `shaw_table`, Shaw et al.'s `q_i . a_ij` joins `q.k` under `c`."""
    q = np.einsum("bnd,dhk->bnhk", x, wq) + bq
    k = np.einsum("bnd,dhk->bnhk", x, wk) + bk
    if query_offset is not None:
        q = q + query_offset
        k = k + key_offset
    if rope_wavelength is not None:
        q = rope_rotate(q, rope_wavelength)
        k = rope_rotate(k, rope_wavelength)
    logits = np.einsum("bqhk,bshk->bhqs", q, k)
    if shaw_table is not None:
        logits = logits + shaw_logits(q, shaw_table, k.shape[1])
    logits = scale * logits + bias
    logits = np.where(key_mask[:, None, None, :].astype(bool), logits, -np.inf)
    return softmax(logits)


def diet_absolute_bias(query_positions, key_positions, n):
    """DIET-ABS `(units, H', n, n)` from tables `(units, H', N, rank)`."""
    q, k = query_positions[:, :, :n], key_positions[:, :, :n]
    return np.einsum("uhir,uhjr->uhij", q, k)


def diet_relative_bias(table, n):
    """DIET-REL `(units, H', n, n)`: `R[clip(j - i, -(N-1), N-1)]` from
    tables `(units, H', 2N - 1)` (entry `N - 1` is `j - i = 0`)."""
    longest = (table.shape[-1] + 1) // 2
    out = np.zeros(table.shape[:2] + (n, n))
    for i in range(n):
        for j in range(n):
            offset = min(max(j - i, -(longest - 1)), longest - 1)
            out[:, :, i, j] = table[:, :, offset + longest - 1]
    return out


def untied_offsets(weights, n, num_heads, epsilon=1e-5):
    """BERT-A^d's `(LN(p) U^Q + b^Q, LN(p) U^K + b^K)`, `(n, H, d)` each."""
    p = layer_norm(
        weights["table"][:n], weights["ln_gamma"], weights["ln_beta"], epsilon
    )
    d = p.shape[1] // num_heads
    return (
        (p @ weights["uq"] + weights["bq"]).reshape(n, num_heads, d),
        (p @ weights["uk"] + weights["bk"]).reshape(n, num_heads, d),
    )


def rope_rotate(x, max_wavelength=10000.0, frequency=None, temperature=1.0):
    """RoPE on `(..., n, heads, d)` with positions `0..n-1` along axis -3.

    Pairs `(k, k + d/2)` turn by `i * max_wavelength^(-2k/d)`, or by
    `i * frequency[k]` when given; the result is multiplied by
    `temperature` (YaRN).
    """
    n, d = x.shape[-3], x.shape[-1]
    half = d // 2
    if frequency is None:
        frequency = max_wavelength ** (-2.0 * np.arange(half) / d)
    angle = np.arange(n)[:, None] * frequency[None, :]  # (n, d/2)
    cos = np.cos(angle)[:, None, :]
    sin = np.sin(angle)[:, None, :]
    low, high = x[..., :half], x[..., half:]
    return temperature * np.concatenate(
        [low * cos - high * sin, low * sin + high * cos], axis=-1
    )


def rope_scaled_frequency(
    head_dim, max_wavelength, scaling, factor, trained_length=None
):
    """SPEC "RoPE scaling at evaluation time", one pair `k` at a time.

    linear: `w_k / s`; ntk: base `b * s^(d/(d-2))`; yarn: with
    `r_k = T w_k / (2 pi)`, `w_k / s` below one rotation, `w_k` above 32,
    `(1 - gamma) w_k / s + gamma w_k` with `gamma = (r_k - 1) / 31` between.
    """
    base = max_wavelength
    if scaling == "ntk":
        base = max_wavelength * factor ** (head_dim / (head_dim - 2))
    out = []
    for k in range(head_dim // 2):
        w = base ** (-2.0 * k / head_dim)
        rotations = (trained_length or 0) * w / (2 * math.pi)
        if scaling == "linear" or (scaling == "yarn" and rotations < 1):
            w = w / factor
        elif scaling == "yarn" and rotations <= 32:
            gamma = (rotations - 1) / 31
            w = (1 - gamma) * w / factor + gamma * w
        out.append(w)
    return np.array(out)


def yarn_temperature(factor):
    """YaRN's factor on queries and keys each, `0.1 ln(s) + 1`."""
    return 0.1 * math.log(factor) + 1


def alibi_slopes(num_heads, maximum=8):
    """ALiBi slopes: `2^(-8(h+1)/H)` for a power of two, else the original
    interpolation (closest power's slopes, then every other slope of twice
    that many)."""

    def power_of_two(count):
        return [2.0 ** (-maximum * (h + 1) / count) for h in range(count)]

    if math.log2(num_heads).is_integer():
        return np.array(power_of_two(num_heads))
    closest = 2 ** math.floor(math.log2(num_heads))
    extra = alibi_slopes(2 * closest, maximum)[0::2][: num_heads - closest]
    return np.concatenate([power_of_two(closest), extra])


def alibi_bias(num_heads, n):
    """`-m_h |i - j|`, `(H, n, n)`."""
    index = np.arange(n)
    distance = np.abs(index[None, :] - index[:, None])
    return -alibi_slopes(num_heads)[:, None, None] * distance


def tupe_reference_layout_bias(
    weights, n, num_heads, relative_table, num_buckets=32, max_distance=128
):
    """TUPE-R as in the authors' code (`cls_relative="reference"`).

    The absolute part is reset (Eq. 9); then a relative table of
    `num_buckets + 1` rows is added, where the `[CLS]` row (all `j`,
    `[CLS]`->`[CLS]` included) uses bucket `num_buckets / 2` and column 0
    of the other rows uses the extra bucket `num_buckets`.
    """
    v = tupe_bias(weights, n, num_heads, untie_cls=True)
    for i in range(n):
        for j in range(n):
            if i == 0:
                bucket = num_buckets // 2
            elif j == 0:
                bucket = num_buckets
            else:
                bucket = t5_bucket(j - i, num_buckets, max_distance)
            v[:, i, j] += relative_table[bucket]
    return v


def sinusoidal_table(n, hidden):
    """Vaswani et al.: `p[i, 2k] = sin(i / 10000^(2k/D))`, `p[i, 2k+1] = cos`."""
    angle = np.arange(n)[:, None] / 10000 ** (
        2 * np.arange(hidden // 2) / hidden
    )
    table = np.zeros((n, hidden))
    table[:, 0::2] = np.sin(angle)
    table[:, 1::2] = np.cos(angle)
    return table


def kerple_log_bias(r1, r2, n):
    """`-r1_h log(1 + r2_h |i - j|)`, `(H, n, n)`."""
    index = np.arange(n)
    distance = np.abs(index[None, :] - index[:, None])
    return -r1[:, None, None] * np.log(1 + r2[:, None, None] * distance)


def fire_bias(c, threshold, w1, b1, w2, b2, n):
    """FIRE `(H, n, n)`: `f([psi(|i-j|) / (psi(max(L, n-1)) + 1e-6),
    sign(i-j)])`, `psi(x) = log(1 + c x)`, `f(x) = relu(x w1 + b1) w2 + b2`
    (the FIRE code's form, with the sign as a second input)."""
    out = np.zeros((w2.shape[1], n, n))
    psi_norm = math.log(1 + c * max(threshold, n - 1)) + 1e-6
    for i in range(n):
        for j in range(n):
            x = np.array(
                [math.log(1 + c * abs(i - j)) / psi_norm, np.sign(i - j)]
            )
            out[:, i, j] = np.maximum(x @ w1 + b1, 0) @ w2 + b2
    return out


def shaw_logits(query, table, key_length):
    """Shaw et al.'s `q_i . A[clip(j - i, -k, k) + k]`, `(B, H, n, m)`, from
    queries `(B, n, H, d)` and a table `(2k + 1, d)` (row `k`: `j = i`)."""
    k = (table.shape[0] - 1) // 2
    batch, n, heads, _ = query.shape
    out = np.zeros((batch, heads, n, key_length))
    for i in range(n):
        for j in range(key_length):
            out[:, :, i, j] = query[:, i] @ table[min(max(j - i, -k), k) + k]
    return out
