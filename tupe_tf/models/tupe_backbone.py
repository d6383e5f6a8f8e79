"""A keras-hub BERT encoder with TUPE / DIET positional encodings."""

import json
import math
import os

import keras
import numpy as np
from keras import ops
from keras.layers import ReversibleEmbedding
from keras_hub.layers import PositionEmbedding
from keras_hub.models import Backbone
from keras_hub.src.utils.keras_utils import gelu_approximate

from tupe_tf.backbone_options import POSITION_ENCODINGS
from tupe_tf.backbone_options import POSITION_SHARINGS
from tupe_tf.backbone_options import SEGMENT_ENCODINGS
from tupe_tf.layers.biased_transformer_encoder import BiasedTransformerEncoder
from tupe_tf.layers.diet_absolute_position_bias import DietAbsolutePositionBias
from tupe_tf.layers.diet_relative_position_bias import DietRelativePositionBias
from tupe_tf.layers.relative_position_bias import RelativePositionBias
from tupe_tf.layers.segment_attention_bias import SegmentAttentionBias
from tupe_tf.layers.sequence_length import checked_sequence_length
from tupe_tf.layers.untied_position_bias import UntiedPositionBias
from tupe_tf.version import __version__

# Options whose absolute positions are added to the word embeddings.
_INPUT_POSITION_ENCODINGS = ("bert", "bert-r")
_DEFAULT_SHARING = {"diet-abs": "layer-wise", "diet-rel": "none"}


def _bert_initializer():
    return keras.initializers.TruncatedNormal(stddev=0.02)


def _choose(name, value, options):
    if value not in options:
        raise ValueError(
            f"`{name}` must be one of {options}. Received: {name}={value!r}"
        )


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
            `bert-ad`, `diet-abs`, `diet-rel`. Defaults to `tupe-r`.
        untie_cls: bool. For `tupe-*`: untie `[CLS]` from positions (TUPE
            Eq. 9). `False` gives the ablation TUPE-A^{tie-cls}; only `tupe-*`
            accept `False`.
        segment_encoding: str. `input` (BERT's segment embedding) or
            `per-head` (DIET's per-head segment attention bias).
        position_rank: int or None. DIET-ABS rank; defaults to the head size.
        position_sharing: str or None. For `diet-*`: `layer-wise`,
            `head-wise` or `none`; defaults to `layer-wise` for `diet-abs` and
            `none` for `diet-rel`. Other options share one bias by all layers.
        relative_buckets: int. T5 buckets (`bert-r`, `tupe-r`).
        relative_max_distance: int. T5 maximum distance.
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
        dropout=0.1,
        max_sequence_length=512,
        num_segments=2,
        position_encoding="tupe-r",
        untie_cls=True,
        segment_encoding="input",
        position_rank=None,
        position_sharing=None,
        relative_buckets=32,
        relative_max_distance=128,
        dtype=None,
        **kwargs,
    ):
        # === Validation: refuse bad combinations before building anything ===
        _choose("position_encoding", position_encoding, POSITION_ENCODINGS)
        _choose("segment_encoding", segment_encoding, SEGMENT_ENCODINGS)
        if hidden_dim % num_heads:
            raise ValueError(
                f"`hidden_dim` must be divisible by `num_heads`. Received: "
                f"hidden_dim={hidden_dim}, num_heads={num_heads}"
            )
        is_tupe = position_encoding.startswith("tupe")
        is_diet = position_encoding.startswith("diet")
        if not untie_cls and not is_tupe:
            raise ValueError(
                "`untie_cls=False` only applies to `tupe-a` and `tupe-r`. "
                f"Received: position_encoding={position_encoding!r}"
            )
        if position_rank is not None and position_encoding != "diet-abs":
            raise ValueError(
                "`position_rank` only applies to `diet-abs`. Received: "
                f"position_encoding={position_encoding!r}"
            )
        if is_diet:
            sharing = position_sharing or _DEFAULT_SHARING[position_encoding]
            _choose("position_sharing", sharing, POSITION_SHARINGS)
        else:
            if position_sharing not in (None, "layer-wise"):
                raise ValueError(
                    "`position_sharing` other than `layer-wise` only applies "
                    "to `diet-abs` and `diet-rel` (the other options share "
                    "one position bias by all layers). Received: "
                    f"position_encoding={position_encoding!r}, "
                    f"position_sharing={position_sharing!r}"
                )
            sharing = "layer-wise"
        head_dim = hidden_dim // num_heads

        # === Layers ===
        self.token_embedding = ReversibleEmbedding(
            input_dim=vocabulary_size,
            output_dim=hidden_dim,
            embeddings_initializer=_bert_initializer(),
            dtype=dtype,
            name="token_embedding",
        )
        self.position_embedding = None
        if position_encoding in _INPUT_POSITION_ENCODINGS:
            self.position_embedding = PositionEmbedding(
                initializer=_bert_initializer(),
                sequence_length=max_sequence_length,
                dtype=dtype,
                name="position_embedding",
            )
        self.segment_embedding = None
        if segment_encoding == "input":
            self.segment_embedding = keras.layers.Embedding(
                input_dim=num_segments,
                output_dim=hidden_dim,
                embeddings_initializer=_bert_initializer(),
                dtype=dtype,
                name="segment_embedding",
            )
        self.embeddings_add = keras.layers.Add(
            dtype=dtype, name="embeddings_add"
        )
        self.embeddings_layer_norm = keras.layers.LayerNormalization(
            axis=-1, epsilon=1e-12, dtype=dtype, name="embeddings_layer_norm"
        )
        self.embeddings_dropout = keras.layers.Dropout(
            dropout, dtype=dtype, name="embeddings_dropout"
        )

        # The content-free bias layer(s); all float32 (see PositionBiasLayer).
        self.position_bias = None
        content_scale = None  # 1/sqrt(d)
        if position_encoding == "bert-r":
            self.position_bias = RelativePositionBias(
                num_heads=num_heads,
                max_sequence_length=max_sequence_length,
                num_buckets=relative_buckets,
                max_distance=relative_max_distance,
                initializer=_bert_initializer(),
                name="relative_position_bias",
            )
        elif is_tupe or position_encoding == "bert-ad":
            self.position_bias = UntiedPositionBias(
                num_heads=num_heads,
                hidden_dim=hidden_dim,
                max_sequence_length=max_sequence_length,
                untie_cls=untie_cls and is_tupe,
                relative_buckets=(
                    relative_buckets if position_encoding == "tupe-r" else None
                ),
                relative_max_distance=relative_max_distance,
                output_projections=position_encoding == "bert-ad",
                initializer=_bert_initializer(),
                name="untied_position_bias",
            )
            content_scale = 1.0 / math.sqrt((2 if is_tupe else 4) * head_dim)
        elif position_encoding == "diet-abs":
            self.position_bias = DietAbsolutePositionBias(
                num_layers=num_layers,
                num_heads=num_heads,
                max_sequence_length=max_sequence_length,
                rank=position_rank or head_dim,
                sharing=sharing,
                initializer=_bert_initializer(),
                name="diet_absolute_position_bias",
            )
        elif position_encoding == "diet-rel":
            self.position_bias = DietRelativePositionBias(
                num_layers=num_layers,
                num_heads=num_heads,
                max_sequence_length=max_sequence_length,
                sharing=sharing,
                initializer=_bert_initializer(),
                name="diet_relative_position_bias",
            )
        self.segment_bias = None
        if segment_encoding == "per-head":
            self.segment_bias = SegmentAttentionBias(
                num_layers=num_layers,
                num_heads=num_heads,
                num_segments=num_segments,
                sharing=sharing,
                initializer=_bert_initializer(),
                name="segment_attention_bias",
            )

        self.transformer_layers = []
        for i in range(num_layers):
            self.transformer_layers.append(
                BiasedTransformerEncoder(
                    num_heads=num_heads,
                    intermediate_dim=intermediate_dim,
                    content_scale=content_scale,
                    activation=gelu_approximate,
                    dropout=dropout,
                    layer_norm_epsilon=1e-12,
                    kernel_initializer=_bert_initializer(),
                    dtype=dtype,
                    name=f"transformer_layer_{i}",
                )
            )
        self.pooled_dense = keras.layers.Dense(
            hidden_dim,
            kernel_initializer=_bert_initializer(),
            activation="tanh",
            dtype=dtype,
            name="pooled_dense",
        )

        # === Functional Model ===
        token_id_input = keras.Input(
            shape=(None,), dtype="int32", name="token_ids"
        )
        segment_id_input = keras.Input(
            shape=(None,), dtype="int32", name="segment_ids"
        )
        padding_mask_input = keras.Input(
            shape=(None,), dtype="int32", name="padding_mask"
        )
        tokens = self.token_embedding(token_id_input)
        embeddings = [tokens]
        if self.position_embedding is not None:
            embeddings.append(self.position_embedding(tokens))
        if self.segment_embedding is not None:
            embeddings.append(self.segment_embedding(segment_id_input))
        x = self.embeddings_add(embeddings) if len(embeddings) > 1 else tokens
        x = self.embeddings_layer_norm(x)
        x = self.embeddings_dropout(x)

        layer_kwargs = _per_layer_attention_inputs(
            position_encoding,
            num_layers,
            position_bias=(
                self.position_bias(token_id_input)
                if self.position_bias is not None
                else None
            ),
            segment_bias=(
                self.segment_bias(segment_id_input)
                if self.segment_bias is not None
                else None
            ),
        )
        for transformer_layer, kwargs_i in zip(
            self.transformer_layers, layer_kwargs
        ):
            x = transformer_layer(
                x, padding_mask=padding_mask_input, **kwargs_i
            )
        sequence_output = x
        cls_token_index = 0
        pooled_output = self.pooled_dense(x[:, cls_token_index, :])
        super().__init__(
            inputs={
                "token_ids": token_id_input,
                "segment_ids": segment_id_input,
                "padding_mask": padding_mask_input,
            },
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
        self.dropout = dropout
        self.max_sequence_length = max_sequence_length
        self.num_segments = num_segments
        self.position_encoding = position_encoding
        self.untie_cls = untie_cls
        self.segment_encoding = segment_encoding
        self.position_rank = position_rank
        self.position_sharing = position_sharing
        self.relative_buckets = relative_buckets
        self.relative_max_distance = relative_max_distance
        self.cls_token_index = cls_token_index

    def call(self, inputs, training=None, mask=None):
        if isinstance(inputs, dict) and "token_ids" in inputs:
            # Fail with a clear message before any gather sees the length.
            inputs = dict(inputs)
            token_ids = inputs["token_ids"]
            length = checked_sequence_length(
                token_ids, self.max_sequence_length
            )
            if not isinstance(length, int):
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
            part excluded; zeros for `bert`). For `bert-ad` it is the
            position-position term `(p U^Q)(p U^K)^T / sqrt(4d)`.
        """
        n = int(sequence_length)
        shape = (self.num_layers, self.num_heads, n, n)
        if self.position_bias is None:
            return np.zeros(shape, "float32")
        token_ids = np.zeros((1, n), "int32")
        bias = self.position_bias(token_ids)
        if self.position_encoding == "bert-ad":
            query, key = bias
            head_dim = self.hidden_dim // self.num_heads
            bias = ops.einsum("ihd,jhd->hij", query, key) / math.sqrt(
                4 * head_dim
            )
        bias = ops.convert_to_numpy(bias).astype("float32")
        # (units, 1, heads', n, n) or (1, heads, n, n) -> (L, H, n, n).
        bias = bias.reshape((-1,) + bias.shape[-3:])
        return np.broadcast_to(bias, shape).copy()

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
        tensors = []
        for layer in self.transformer_layers:
            node = layer._inbound_nodes[0]
            kwargs = {
                name: node.arguments.kwargs[name]
                for name in ("attention_bias", "query_offset", "key_offset")
                if node.arguments.kwargs.get(name) is not None
            }
            tensors.append((node.arguments.args[0], kwargs))
        probe = keras.Model(self.input, keras.tree.flatten(tensors))
        values = keras.tree.pack_sequence_as(tensors, probe(inputs))
        logits = []
        for layer, (x, kwargs) in zip(self.transformer_layers, values):
            attention = layer._self_attention_layer
            logits.append(
                ops.convert_to_numpy(
                    attention.attention_logits(
                        x,
                        x,
                        attention_bias=(
                            kwargs.get("attention_bias")
                            if include_bias
                            else None
                        ),
                        query_offset=kwargs.get("query_offset"),
                        key_offset=kwargs.get("key_offset"),
                    )
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
                "dropout": self.dropout,
                "max_sequence_length": self.max_sequence_length,
                "num_segments": self.num_segments,
                "position_encoding": self.position_encoding,
                "untie_cls": self.untie_cls,
                "segment_encoding": self.segment_encoding,
                "position_rank": self.position_rank,
                "position_sharing": self.position_sharing,
                "relative_buckets": self.relative_buckets,
                "relative_max_distance": self.relative_max_distance,
            }
        )
        return config


def _per_layer_attention_inputs(
    position_encoding, num_layers, position_bias, segment_bias
):
    """Keyword arguments of each transformer layer's call.

    Shared parts are summed once and the same tensor goes to every layer
    that shares it; per-layer tables are sliced from one batched tensor.
    """
    if position_encoding == "bert-ad":
        query_offset, key_offset = position_bias
        offsets = {"query_offset": query_offset, "key_offset": key_offset}
        position_bias = None
    else:
        offsets = {}
    # Normalise to a list of `units` tensors of shape (1|B, heads, n, n).
    if position_bias is not None and len(position_bias.shape) == 5:
        position_units = [
            position_bias[u] for u in range(position_bias.shape[0])
        ]
    elif position_bias is not None:
        position_units = [position_bias]
    else:
        position_units = [None]
    segment_units = (
        [segment_bias[u] for u in range(segment_bias.shape[0])]
        if segment_bias is not None
        else [None]
    )
    summed = {}
    layer_kwargs = []
    for layer_index in range(num_layers):
        p = layer_index if len(position_units) > 1 else 0
        s = layer_index if len(segment_units) > 1 else 0
        if (p, s) not in summed:
            parts = [
                t
                for t in (position_units[p], segment_units[s])
                if t is not None
            ]
            summed[(p, s)] = (
                None
                if not parts
                else parts[0]
                if len(parts) == 1
                else parts[0] + parts[1]
            )
        layer_kwargs.append({"attention_bias": summed[(p, s)], **offsets})
    return layer_kwargs
