"""An encoder-only model (BERT's backbone) from the Transformer's blocks."""

import keras
from keras import ops

from keras_transformer.checks import (
    check_positive_int,
    check_rate,
    head_width,
)
from keras_transformer.layers.dropout import Dropout
from keras_transformer.layers.encoder_block import EncoderBlock
from keras_transformer.layers.position_wise_dense import PositionWiseDense
from keras_transformer.layers.positional_encoding import PositionalEncoding
from keras_transformer.layers.token_embedding import TokenEmbedding
from keras_transformer.models.block_stack import apply_blocks, build_stack, embed
from keras_transformer.models.model_base import ModelBase
from keras_transformer.models.presets import ENCODER_PRESETS
from keras_transformer.special_tokens import PAD_ID


@keras.saving.register_keras_serializable(package="keras_transformer")
class BidirectionalEncoder(ModelBase):
    """The Transformer's encoder on its own, as BERT (Devlin et al., 2019)
    built it: every token sees every other, both ways.

    Token, segment and learned position embeddings are summed, normalized
    (LayerNorm) and dropped out, then run through `num_layers`
    `EncoderBlock`s (post-norm, GELU). The first token's final state,
    through a tanh layer, is the pooled summary a classifier reads. The
    masked-LM (`MaskedLM`) and classification (`SequenceClassifier`) models
    take this encoder, so one pretrained encoder serves both.

    Token id `pad_id` (0) is padding, hidden from attention.

    Args:
        vocabulary_size: int.
        num_layers: int. Default 12.
        d_model: int. Default 768.
        num_heads: int. Default 12.
        d_ff: int. Default 3072.
        key_dim: int, `d_k = d_v`. Default `d_model // num_heads`.
        dropout_rate: float in `[0, 1)`. Default 0.1.
        max_length: int, positions of the learned table. Default 512.
        num_segments: int, segment (token type) ids `[0, num_segments)`.
            Default 2 (sentence A, sentence B).
        activation: the feed-forward activation. Default "gelu".
        gated: bool, the feed-forward network's gated form (`FeedForward`).
            Default False.
        norm_first: bool, pre-norm blocks and a final LayerNorm.
        layer_norm_epsilon: float. Default 1e-12, as BERT.
        attention_dropout: float in `[0, 1)`. Default 0.
        pad_id: int, the padding id. Default 0.
        dtype: a dtype or `keras.DTypePolicy`.
        **kwargs: passed to `keras.Model`.

    Inputs:
        `{"token_ids": int (batch, seq), "segment_ids": int (batch, seq)}`.

    Returns:
        `{"sequence_output": (batch, seq, d_model),
          "pooled_output": (batch, d_model)}`.

    Example:
    >>> encoder = BidirectionalEncoder.from_preset("bert_tiny")
    >>> ids = keras.ops.ones((2, 7), "int32")
    >>> encoder({"token_ids": ids, "segment_ids": 0 * ids})["pooled_output"].shape
    (2, 128)
    """

    presets = ENCODER_PRESETS  # `from_preset(name)`

    def __init__(
        self,
        vocabulary_size,
        num_layers=12,
        d_model=768,
        num_heads=12,
        d_ff=3072,
        key_dim=None,
        dropout_rate=0.1,
        max_length=512,
        num_segments=2,
        activation="gelu",
        gated=False,
        norm_first=False,
        layer_norm_epsilon=1e-12,
        attention_dropout=0.0,
        pad_id=PAD_ID,
        dtype=None,
        **kwargs,
    ):
        for name, value in [("vocabulary_size", vocabulary_size),
                            ("num_layers", num_layers), ("d_model", d_model),
                            ("num_heads", num_heads), ("max_length", max_length),
                            ("num_segments", num_segments)]:
            check_positive_int(name, value)
        key_dim = key_dim or head_width(d_model, num_heads)
        check_rate("dropout_rate", dropout_rate)
        if not (isinstance(pad_id, int) and 0 <= pad_id < vocabulary_size):
            raise ValueError(
                f"`pad_id` must be a token id in [0, {vocabulary_size}). "
                f"Received: pad_id={pad_id!r}"
            )

        # === Layers ===
        self.token_embedding = TokenEmbedding(
            vocabulary_size, d_model, scale=False, name="token_embedding", dtype=dtype
        )
        self.segment_embedding = TokenEmbedding(
            num_segments, d_model, scale=False, name="segment_embedding", dtype=dtype
        )
        self.positions = PositionalEncoding(
            max_length, learned=True, name="positional_encoding", dtype=dtype
        )
        self.embedding_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, name="embedding_norm", dtype=dtype
        )
        self.embedding_dropout = Dropout(dropout_rate, name="embedding_dropout", dtype=dtype)
        self.blocks, self.final_norm = build_stack(
            EncoderBlock, num_layers, "block", "final_norm", norm_first, layer_norm_epsilon,
            dtype, num_heads=num_heads, key_dim=key_dim, d_ff=d_ff,
            dropout_rate=dropout_rate, attention_dropout=attention_dropout,
            activation=activation, gated=gated,
        )
        self.pooler = PositionWiseDense(d_model, activation="tanh", name="pooler", dtype=dtype)

        # === Config ===
        self.vocabulary_size = vocabulary_size
        self.num_layers = num_layers
        self.d_model = d_model
        self.num_heads = num_heads
        self.d_ff = d_ff
        self.key_dim = key_dim
        self.dropout_rate = dropout_rate
        self.max_length = max_length
        self.num_segments = num_segments
        self.activation = activation
        self.gated = gated
        self.norm_first = norm_first
        self.layer_norm_epsilon = layer_norm_epsilon
        self.attention_dropout = attention_dropout
        self.pad_id = pad_id

        # === Functional model ===
        token_ids = keras.Input(shape=(None,), dtype="int32", name="token_ids")
        segment_ids = keras.Input(shape=(None,), dtype="int32", name="segment_ids")
        x = self.encode(token_ids, segment_ids)
        super().__init__(
            inputs={"token_ids": token_ids, "segment_ids": segment_ids},
            outputs={"sequence_output": x, "pooled_output": self.pool(x)},
            dtype=dtype,
            **kwargs,
        )

    # === Stages ===

    def encode(self, token_ids, segment_ids, output_positions=None, training=None):
        """int `(batch, seq)` token and segment ids --> the last block's
        states `(batch, seq, d_model)`.

        With `output_positions` (int `(batch, n)`), only the states at those
        positions, `(batch, n, d_model)`: the last block then computes
        nothing else, which saves most of its work when a head reads a few
        positions (the masked tokens, the first token).
        """
        x = embed(
            token_ids, self.token_embedding, self.positions, self.embedding_dropout,
            extra=self.segment_embedding(segment_ids), norm=self.embedding_norm,
            training=training,
        )
        x, _, _ = apply_blocks(
            self.blocks, x, self.final_norm,
            padding_mask=ops.not_equal(token_ids, self.pad_id),
            query_positions=output_positions, training=training,
        )
        return x

    def pool(self, states):
        """`(batch, seq, d_model)` states, the first ([CLS]) token's first
        --> the pooled summary `(batch, d_model)`."""
        return self.pooler(states[:, 0, :])
