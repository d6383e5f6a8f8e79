"""A keras-hub BERT encoder with TUPE / DIET positional encodings."""

import dataclasses
import json
import os
import types

import keras
import numpy as np
from keras import ops
from keras.layers import ReversibleEmbedding
from keras_hub.layers import PositionEmbedding
from keras_hub.layers import SinePositionEncoding
from keras_hub.models import Backbone

from tupe_tf.layers.biased_transformer_encoder import BiasedTransformerEncoder
from tupe_tf.layers.keras_hub_internals import gelu_approximate
from tupe_tf.layers.segment_attention_bias import SegmentAttentionBias
from tupe_tf.layers.sequence_length import checked_sequence_length
from tupe_tf.models.position_encodings import bert_initializer
from tupe_tf.models.position_encodings import build_layer
from tupe_tf.models.position_encodings import validated_encoding
from tupe_tf.utils.backbone_options import OPTION_DEFAULTS
from tupe_tf.utils.backbone_options import BackboneOptions
from tupe_tf.utils.backbone_options import check_options
from tupe_tf.utils.keyword_arguments import refuse_unknown_keywords
from tupe_tf.version import __version__

# The defaults of the backbone options, declared once with their help and
# choices (`BackboneOptions`, whose fields the training flags are).
DEFAULTS = BackboneOptions()
# Each of `INTERMEDIATE_ACTIVATIONS` -> the feed-forward activation (keras'
# "gelu" is the exact erf form; keras-hub's BERT uses the tanh approximation).
FEEDFORWARD_ACTIVATIONS = {
    "gelu_approximate": gelu_approximate,
    "gelu": "gelu",
}


@keras.saving.register_keras_serializable(package="tupe_tf")
class TupeBackbone(Backbone):
    """A BERT encoder with a choice of positional encodings.

    Same inputs (`token_ids`, `segment_ids`, `padding_mask`), outputs
    (`sequence_output`, `pooled_output`) and `token_embedding` as
    `keras_hub.models.BertBackbone`, so keras-hub's `BertMaskedLM` and
    `BertTextClassifier` take it. Every layer computes
    `softmax_j(c * (x_i W^Q_h)(x_j W^K_h)^T + beta[h, i, j])`; the options
    choose the input embedding, `c` and `beta` (see the package SPEC):

    - `bert` (BERT-A): `LN(w + p + s)`, `beta = 0`; keras-hub BERT exactly.
    - `bert-r` (BERT-R): `LN(w + p + s)`, T5 relative buckets.
    - `tupe-a`: `LN(w + s)`, untied position correlation (shared projections)
      with the `[CLS]` reset, `c = 1/sqrt(2d)`.
    - `tupe-r`: `tupe-a` plus T5 relative buckets, reset applied to the sum.
    - `bert-ad` (ablation BERT-A^d): `LN(w + s)`, `p U` added to every
      layer's query and key, `c = 1/sqrt(4d)` on the whole product.
    - `diet-abs`: low-rank per-head absolute bias `P_Q P_K^T`.
    - `diet-rel`: per-head relative scalars `R_h[j - i]`.
    - `rope`: `LN(w + s)`, every layer rotates its query and key (RoPE,
      keras-hub's `RotaryEmbedding` tables), `beta = 0`.
    - `alibi`: `LN(w + s)`, fixed symmetric `beta = -m_h |i - j|` (ALiBi).
    - `sinusoidal`: `LN(sqrt(D) w + p + s)` with the fixed sin/cos table
      of Vaswani et al. and `w` initialised `N(0, 1/D)`, `beta = 0`.
    - `nope`: `LN(w + s)`, `beta = 0`: no position information.
    - `kerple-log`: `LN(w + s)`, `beta = -r1_h log(1 + r2_h |i - j|)`.
    - `fire`: `LN(w + s)`, `beta` an MLP of the interpolated offset (FIRE).
    - `shaw`: `LN(w + s)`, every layer adds `q_i . a_{clip(j - i)}` to its
      logits under `c` (Shaw et al.'s relative keys, one table per layer).

    What each option builds is declared once, in
    `tupe_tf.models.position_encodings`.

    Position-only biases are computed once per forward pass and shared by
    every layer that shares them.

    Args:
        vocabulary_size: int. Size of the token vocabulary.
        num_layers: int. Number of transformer layers.
        num_heads: int. Number of attention heads; divides `hidden_dim`.
        hidden_dim: int. Width of the encoder.
        intermediate_dim: int. Width of the feedforward layers.
        dropout: float. Dropout (embeddings, attention probabilities,
            residual branches).
        max_sequence_length: int. Longest sequence the encoder accepts.
        num_segments: int. Number of segment ids.
        position_encoding: str. One of `bert`, `bert-r`, `tupe-a`, `tupe-r`,
            `bert-ad`, `diet-abs`, `diet-rel`, `rope`, `alibi`,
            `sinusoidal`, `nope`, `kerple-log`, `fire`, `shaw`.
        untie_cls: bool. For `tupe-*`: untie `[CLS]` from positions (TUPE
            Eq. 9). `False` gives the ablation TUPE-A^{tie-cls}; only `tupe-*`
            accept `False`.
        segment_encoding: str. `input` (BERT's segment embedding),
            `per-head` (DIET's per-head segment attention bias) or `none`
            (no segments, as in the TUPE authors' code; `segment_ids` is
            still an input and is ignored).
        position_rank: int or None. DIET-ABS rank; defaults to the head size.
        position_sharing: str or None. For `diet-*`: `layer-wise`,
            `head-wise` or `none`; defaults to `layer-wise` for `diet-abs` and
            `none` for `diet-rel`. Other options share one bias by all layers.
        relative_buckets: int. T5 buckets (`bert-r`, `tupe-r`).
        relative_max_distance: int. T5 maximum distance.
        rope_max_wavelength: float. For `rope`: the base wavelength of the
            rotation angles; must be positive.
        layer_norm_epsilon: float. Epsilon of the embedding and encoder
            LayerNorms: 1e-12 (keras-hub's BERT) or 1e-5 (the TUPE authors'
            code). The positional table's own LayerNorm (`tupe-*`,
            `bert-ad`) keeps 1e-5.
        intermediate_activation: str. Feed-forward activation:
            `gelu_approximate` (tanh form, keras-hub's BERT) or `gelu`
            (exact erf form, the TUPE authors' code).
        cls_relative: str. For `tupe-r`: `reset` (the paper's Eq. 11, reset
            of the sum) or `reference` (the authors' code: `[CLS]` gets its
            own relative buckets; see docs/spec.md).
        rope_scaling: str. For `rope`, length extension at evaluation:
            `none`, `linear` (positions `i / s`), `ntk` (base
            `b s^(d / (d - 2))`) or `yarn` (per-dimension interpolation and
            logits times `(0.1 ln(s) + 1)^2`). To evaluate a trained preset
            at `s` times its length, override it in `from_preset` (see
            docs/spec.md).
        rope_scaling_factor: float. For `rope` with a `rope_scaling`: `s`,
            at least 1.
        rope_trained_length: int or None. For `rope_scaling="yarn"` only
            (and required there): the trained length `T`.
        shaw_max_distance: int. For `shaw`: `k`, the largest relative
            distance with its own key vector (farther ones share the last).
        dtype: string or `keras.mixed_precision.DTypePolicy`.

    Example:
    ```python
    backbone = tupe_tf.TupeBackbone(
        vocabulary_size=30522, num_layers=2, num_heads=4, hidden_dim=64,
        intermediate_dim=128, max_sequence_length=128,
        position_encoding="tupe-r")
    outputs = backbone({
        "token_ids": np.ones((1, 12), "int32"),
        "segment_ids": np.zeros((1, 12), "int32"),
        "padding_mask": np.ones((1, 12), "int32"),
    })
    masked_lm = keras_hub.models.BertMaskedLM(backbone, preprocessor=None)
    ```
    """

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        num_heads,
        hidden_dim,
        intermediate_dim,
        dropout=DEFAULTS.dropout,
        max_sequence_length=DEFAULTS.max_sequence_length,
        num_segments=DEFAULTS.num_segments,
        position_encoding=DEFAULTS.position_encoding,
        untie_cls=DEFAULTS.untie_cls,
        segment_encoding=DEFAULTS.segment_encoding,
        position_rank=DEFAULTS.position_rank,
        position_sharing=DEFAULTS.position_sharing,
        relative_buckets=DEFAULTS.relative_buckets,
        relative_max_distance=DEFAULTS.relative_max_distance,
        rope_max_wavelength=DEFAULTS.rope_max_wavelength,
        layer_norm_epsilon=DEFAULTS.layer_norm_epsilon,
        intermediate_activation=DEFAULTS.intermediate_activation,
        cls_relative=DEFAULTS.cls_relative,
        rope_scaling=DEFAULTS.rope_scaling,
        rope_scaling_factor=DEFAULTS.rope_scaling_factor,
        rope_trained_length=DEFAULTS.rope_trained_length,
        shaw_max_distance=DEFAULTS.shaw_max_distance,
        dtype=None,
        **kwargs,
    ):
        # A misspelt option must not silently build the default model.
        refuse_unknown_keywords(TupeBackbone, kwargs)
        options = BackboneOptions(
            dropout=dropout,
            max_sequence_length=max_sequence_length,
            num_segments=num_segments,
            position_encoding=position_encoding,
            untie_cls=untie_cls,
            segment_encoding=segment_encoding,
            position_rank=position_rank,
            position_sharing=position_sharing,
            relative_buckets=relative_buckets,
            relative_max_distance=relative_max_distance,
            rope_max_wavelength=rope_max_wavelength,
            layer_norm_epsilon=layer_norm_epsilon,
            intermediate_activation=intermediate_activation,
            cls_relative=cls_relative,
            rope_scaling=rope_scaling,
            rope_scaling_factor=rope_scaling_factor,
            rope_trained_length=rope_trained_length,
            shaw_max_distance=shaw_max_distance,
        )
        # === Validation: refuse bad combinations before building anything ===
        check_options(options)
        options = dataclasses.asdict(options)
        if hidden_dim % num_heads:
            raise ValueError(
                f"`hidden_dim` must be divisible by `num_heads`. Received: "
                f"hidden_dim={hidden_dim}, num_heads={num_heads}"
            )
        encoding, sharing = validated_encoding(options)
        head_dim = hidden_dim // num_heads
        layer_args = types.SimpleNamespace(
            **options,
            num_layers=num_layers,
            num_heads=num_heads,
            hidden_dim=hidden_dim,
            head_dim=head_dim,
            sharing=sharing,
            initializer=bert_initializer(),
            dtype=dtype,
        )

        # === Layers ===
        # fairseq's Transformer: N(0, 1/D), times sqrt(D) at the input
        # (below), so a token vector has about the norm of the table's. One
        # initializer either way: each draws one seed, so the later layers'
        # initial weights stay those of the other options at a seed.
        token_initializer = (
            keras.initializers.RandomNormal(stddev=hidden_dim**-0.5)
            if encoding.scaled_tokens
            else bert_initializer()
        )
        self.token_embedding = ReversibleEmbedding(
            input_dim=vocabulary_size,
            output_dim=hidden_dim,
            embeddings_initializer=token_initializer,
            dtype=dtype,
            name="token_embedding",
        )
        self.position_embedding = None
        if encoding.input_positions and encoding.input_table == "learned":
            self.position_embedding = PositionEmbedding(
                initializer=bert_initializer(),
                sequence_length=max_sequence_length,
                dtype=dtype,
                name="position_embedding",
            )
        elif encoding.input_positions:
            # keras-hub's table is the SPEC's formula. It is computed in
            # float32 (bfloat16 cannot hold its values at long lengths) and
            # cast where it meets the token embeddings.
            self.position_embedding = SinePositionEncoding(
                dtype="float32", name="position_embedding"
            )
        self.segment_embedding = None
        if segment_encoding == "input":
            self.segment_embedding = keras.layers.Embedding(
                input_dim=num_segments,
                output_dim=hidden_dim,
                embeddings_initializer=bert_initializer(),
                dtype=dtype,
                name="segment_embedding",
            )
        self.embeddings_add = keras.layers.Add(
            dtype=dtype, name="embeddings_add"
        )
        self.embeddings_layer_norm = keras.layers.LayerNormalization(
            axis=-1,
            epsilon=layer_norm_epsilon,
            dtype=dtype,
            name="embeddings_layer_norm",
        )
        self.embeddings_dropout = keras.layers.Dropout(
            dropout, dtype=dtype, name="embeddings_dropout"
        )
        # The content-free layer of the option (float32, PositionBiasLayer).
        self.position_bias = build_layer(encoding.layer, layer_args)
        self.segment_bias = None
        if segment_encoding == "per-head":
            self.segment_bias = SegmentAttentionBias(
                num_layers=num_layers,
                num_heads=num_heads,
                num_segments=num_segments,
                sharing=sharing,
                initializer=bert_initializer(),
                name="segment_attention_bias",
            )
        self.transformer_layers = [
            BiasedTransformerEncoder(
                num_heads=num_heads,
                intermediate_dim=intermediate_dim,
                content_scale=encoding.content_scale(head_dim),
                query_logits=build_layer(
                    encoding.query_logits, layer_args, layer_index=i
                ),
                activation=FEEDFORWARD_ACTIVATIONS[intermediate_activation],
                dropout=dropout,
                layer_norm_epsilon=layer_norm_epsilon,
                kernel_initializer=bert_initializer(),
                dtype=dtype,
                name=f"transformer_layer_{i}",
            )
            for i in range(num_layers)
        ]
        self.pooled_dense = keras.layers.Dense(
            hidden_dim,
            kernel_initializer=bert_initializer(),
            activation="tanh",
            dtype=dtype,
            name="pooled_dense",
        )

        # === Functional Model ===
        inputs = {
            name: keras.Input(shape=(None,), dtype="int32", name=name)
            for name in ("token_ids", "segment_ids", "padding_mask")
        }
        tokens = self.token_embedding(inputs["token_ids"])
        if encoding.scaled_tokens:
            # Only the input is scaled: a tied output layer (the masked-LM
            # head's `reverse=True`) reads the unscaled matrix, as fairseq.
            # A Python float, not a tensor: exported graphs keep it a
            # constant (a captured tensor would become an ONNX input).
            tokens = tokens * float(hidden_dim**0.5)
        embeddings = [tokens]
        if self.position_embedding is not None:
            embeddings.append(self.position_embedding(tokens))
        if self.segment_embedding is not None:
            embeddings.append(self.segment_embedding(inputs["segment_ids"]))
        x = self.embeddings_add(embeddings) if len(embeddings) > 1 else tokens
        x = self.embeddings_layer_norm(x)
        x = self.embeddings_dropout(x)

        # Each content-free tensor is computed once, here, for all layers.
        self.layer_attention_arguments = per_layer_attention_arguments(
            num_layers,
            encoding.attention_argument,
            (
                self.position_bias(inputs["token_ids"])
                if self.position_bias is not None
                else None
            ),
            (
                self.segment_bias(inputs["segment_ids"])
                if self.segment_bias is not None
                else None
            ),
        )
        self.layer_inputs = []
        for transformer_layer, arguments in zip(
            self.transformer_layers, self.layer_attention_arguments
        ):
            self.layer_inputs.append(x)
            x = transformer_layer(
                x, padding_mask=inputs["padding_mask"], **arguments
            )
        sequence_output = x
        cls_token_index = 0
        pooled_output = self.pooled_dense(x[:, cls_token_index, :])
        super().__init__(
            inputs=inputs,
            outputs={
                "sequence_output": sequence_output,
                "pooled_output": pooled_output,
            },
            dtype=dtype,
            **kwargs,
        )

        # === Config ===
        self.vocabulary_size = vocabulary_size
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        for name, value in options.items():
            setattr(self, name, value)
        self.cls_token_index = cls_token_index

    def call(self, inputs, training=None, mask=None):
        if isinstance(inputs, dict) and "token_ids" in inputs:
            # Fail with a clear message before any gather sees the length.
            inputs = dict(inputs)
            token_ids = inputs["token_ids"]
            length = checked_sequence_length(
                token_ids, self.max_sequence_length
            )
            if ops.is_tensor(length):  # TensorFlow's asserted length
                inputs["token_ids"] = ops.reshape(
                    token_ids, ops.stack([ops.shape(token_ids)[0], length])
                )
        return super().call(inputs, training=training, mask=mask)

    def positional_bias(self, sequence_length):
        """The content-free bias each layer adds, for inspection and pictures.

        Args:
            sequence_length: int. `n`.

        Returns:
            A float32 NumPy array `(num_layers, num_heads, n, n)`: the
            position-only part of `beta` after the `[CLS]` reset (segment
            part excluded; zeros for `bert`, `rope`, `sinusoidal` and
            `nope`, the ALiBi matrix `-m_h |i - j|` for `alibi`). For
            `bert-ad` it is the position-position term
            `(p U^Q)(p U^K)^T / sqrt(4d)`.
        """
        n = int(sequence_length)
        shape = (self.num_layers, self.num_heads, n, n)
        if self.position_bias is None:
            return np.zeros(shape, "float32")
        bias = self.position_bias.content_free_bias(n)
        bias = ops.convert_to_numpy(bias).astype("float32")
        # (units, 1, heads', n, n) -> (L, H, n, n).
        return np.broadcast_to(bias[:, 0], shape).copy()

    def attention_logits(self, inputs, include_bias=True):
        """Every layer's attention logits, for inspection (eager).

        Args:
            inputs: dict of `token_ids`, `segment_ids`, `padding_mask`.
            include_bias: bool. With False, the content-free bias `beta` is
                left out (the segment part too): what remains is
                `c * (x W^Q)(x W^K)^T`, whose rank is at most the head size
                (the DIET paper's argument against positions at the input).

        Returns:
            A list of float32 NumPy arrays `(batch, heads, n, n)`, one per
            layer, before masking and softmax.
        """
        probe = keras.Model(
            self.input, [self.layer_inputs, self.layer_attention_arguments]
        )
        layer_inputs, arguments = probe(inputs)
        logits = []
        for layer, x, layer_arguments in zip(
            self.transformer_layers, layer_inputs, arguments
        ):
            layer_arguments = dict(layer_arguments)
            if not include_bias:
                layer_arguments.pop("attention_bias", None)
            logits.append(
                ops.convert_to_numpy(
                    layer.attention_logits(x, **layer_arguments)
                )
            )
        return logits

    def fold_positional_bias(self, sequence_lengths):
        """Freezes the content-free bias for fixed lengths (export/inference).

        The position-only bias depends only on the weights and the length, so
        for the given lengths it becomes a constant: an exported graph then
        pays nothing for positions. Later weight updates are ignored for
        those lengths until `unfold_positional_bias()`.

        Args:
            sequence_lengths: iterable of int.
        """
        if self.position_bias is not None:
            self.position_bias.fold(sequence_lengths)

    def unfold_positional_bias(self):
        """Undoes `fold_positional_bias`."""
        if self.position_bias is not None:
            self.position_bias.unfold()

    def save_to_preset(self, preset_dir, max_shard_size=10):
        """keras-hub's `save_to_preset`, recording the tupe-tf version.

        The version goes into the preset's `metadata.json` as
        `tupe_tf_version`, so loaders can refuse presets of another version
        (see `tupe_tf.check_preset`).
        """
        super().save_to_preset(preset_dir, max_shard_size=max_shard_size)
        metadata_path = os.path.join(preset_dir, "metadata.json")
        with open(metadata_path) as metadata_file:
            metadata = json.load(metadata_file)
        metadata["tupe_tf_version"] = __version__
        with open(metadata_path, "w") as metadata_file:
            json.dump(metadata, metadata_file, indent=4)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "num_layers": self.num_layers,
                "num_heads": self.num_heads,
                "hidden_dim": self.hidden_dim,
                "intermediate_dim": self.intermediate_dim,
                **{name: getattr(self, name) for name in OPTION_DEFAULTS},
            }
        )
        return config


def per_layer_attention_arguments(
    num_layers, position_argument, position_output, segment_bias
):
    """Keyword arguments of each transformer layer's call.

    Args:
        num_layers: int.
        position_argument: the attention argument that takes
            `position_output` (see `backbone_options.PositionEncoding`).
        position_output: the content-free layer's output or None; a bias
            is `(units, 1, heads, n, n)`.
        segment_bias: `(units, batch, heads, n, n)` or None.

    Returns:
        A list of `num_layers` dicts (without the arguments an option
        does not use). Shared parts are summed once and the
        same tensor goes to every layer that shares it; per-layer tables
        are sliced from one batched tensor.
    """
    shared = {}
    biases = []
    if position_argument == "attention_bias":
        biases.append(position_output)
    elif position_output is not None:
        shared[position_argument] = position_output
    biases.append(segment_bias)
    biases = [b for b in biases if b is not None]
    summed = {}
    layer_arguments = []
    for layer_index in range(num_layers):
        units = tuple(layer_index if b.shape[0] > 1 else 0 for b in biases)
        if biases and units not in summed:
            parts = [b[u] for b, u in zip(biases, units)]
            summed[units] = parts[0] if len(parts) == 1 else parts[0] + parts[1]
        arguments = dict(shared)
        if biases:
            arguments["attention_bias"] = summed[units]
        layer_arguments.append(arguments)
    return layer_arguments
