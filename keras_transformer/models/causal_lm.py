"""A decoder-only language model (GPT) from the Transformer's blocks."""

import keras
from keras import ops

from keras_transformer.checks import (
    check_positive_int,
    check_rate,
    check_special_ids,
    head_width,
)
from keras_transformer.layers.dropout import Dropout
from keras_transformer.layers.encoder_block import EncoderBlock
from keras_transformer.layers.positional_encoding import PositionalEncoding
from keras_transformer.layers.token_embedding import TokenEmbedding
from keras_transformer.models.block_stack import apply_blocks, build_stack, embed
from keras_transformer.models.model_base import ModelBase
from keras_transformer.models.presets import CAUSAL_LM_PRESETS
from keras_transformer.special_tokens import BOS_ID, EOS_ID, PAD_ID


@keras.saving.register_keras_serializable(package="keras_transformer")
class CausalLM(ModelBase):
    """A causal language model: the Transformer's decoder without
    cross-attention, as GPT (Radford et al., 2018) built it.

    Token embeddings plus positions (with dropout) feed `num_layers`
    `EncoderBlock`s run with a causal mask; the output is projected to
    logits by the transposed embedding matrix. The defaults are GPT's:
    learned positions, unscaled embeddings, GELU, post-norm.
    `norm_first=True` is GPT-2's pre-norm with a final LayerNorm.

    Token id `pad_id` (0) is padding: padded keys are hidden from
    attention, and the loss should ignore padded labels. `generate`
    continues prompts with the key/value cache and a keras-hub sampler.

    Args:
        vocabulary_size: int.
        num_layers: int. Default 12.
        d_model: int. Default 768.
        num_heads: int. Default 12.
        d_ff: int, the feed-forward inner width. Default 3072.
        key_dim: int, `d_k = d_v`. Default `d_model // num_heads`.
        dropout_rate: float in `[0, 1)`, on the embeddings and every
            sub-layer output. Default 0.1.
        max_length: int, positions of the learned table. Default 512.
        activation: the feed-forward activation. Default GELU (tanh form).
        gated: bool, the feed-forward network's gated form (`FeedForward`).
            Default False.
        norm_first: bool, pre-norm blocks and a final LayerNorm (GPT-2).
        learned_positions: bool, a learned table (default) or sinusoids.
        scale_embeddings: bool, multiply embeddings by `sqrt(d_model)` as
            the paper does. Default False, as GPT.
        layer_norm_epsilon: float. Default 1e-5.
        attention_dropout: float in `[0, 1)`. Default 0.
        pad_id, bos_id, eos_id: int, special token ids (0, 1, 2).
        dtype: a dtype or `keras.DTypePolicy`.
        **kwargs: passed to `keras.Model`.

    Inputs:
        `{"token_ids": int (batch, seq)}`.

    Returns:
        float32 logits `(batch, seq, vocabulary_size)`: at position `i`,
        the distribution of token `i + 1`.

    Example:
    >>> lm = CausalLM.from_preset("gpt_tiny")
    >>> lm({"token_ids": keras.ops.ones((2, 7), "int32")}).shape
    (2, 7, 8000)
    """

    presets = CAUSAL_LM_PRESETS  # `from_preset(name)`

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
        activation="gelu",
        gated=False,
        norm_first=False,
        learned_positions=True,
        scale_embeddings=False,
        layer_norm_epsilon=1e-5,
        attention_dropout=0.0,
        pad_id=PAD_ID,
        bos_id=BOS_ID,
        eos_id=EOS_ID,
        dtype=None,
        **kwargs,
    ):
        for name, value in [("vocabulary_size", vocabulary_size),
                            ("num_layers", num_layers), ("d_model", d_model),
                            ("num_heads", num_heads), ("max_length", max_length)]:
            check_positive_int(name, value)
        key_dim = key_dim or head_width(d_model, num_heads)
        check_rate("dropout_rate", dropout_rate)
        check_special_ids(pad_id, bos_id, eos_id, vocabulary_size)

        # === Layers ===
        self.token_embedding = TokenEmbedding(
            vocabulary_size, d_model, scale=scale_embeddings,
            name="token_embedding", dtype=dtype,
        )
        self.positions = PositionalEncoding(
            max_length, learned=learned_positions, name="positional_encoding",
            dtype=dtype,
        )
        self.embedding_dropout = Dropout(dropout_rate, name="embedding_dropout", dtype=dtype)
        self.blocks, self.final_norm = build_stack(
            EncoderBlock, num_layers, "block", "final_norm", norm_first, layer_norm_epsilon,
            dtype, num_heads=num_heads, key_dim=key_dim, d_ff=d_ff,
            dropout_rate=dropout_rate, attention_dropout=attention_dropout,
            activation=activation, gated=gated,
        )

        # === Config ===
        self.vocabulary_size = vocabulary_size
        self.num_layers = num_layers
        self.d_model = d_model
        self.num_heads = num_heads
        self.d_ff = d_ff
        self.key_dim = key_dim
        self.dropout_rate = dropout_rate
        self.max_length = max_length
        self.activation = activation
        self.gated = gated
        self.norm_first = norm_first
        self.learned_positions = learned_positions
        self.scale_embeddings = scale_embeddings
        self.layer_norm_epsilon = layer_norm_epsilon
        self.attention_dropout = attention_dropout
        self.pad_id = pad_id
        self.bos_id = bos_id
        self.eos_id = eos_id

        # === Functional model ===
        token_ids = keras.Input(shape=(None,), dtype="int32", name="token_ids")
        logits = self.logits(self.hidden_states(token_ids))
        super().__init__(
            inputs={"token_ids": token_ids}, outputs=logits, dtype=dtype, **kwargs
        )

    @property
    def max_decoder_length(self):
        """The most positions there are embeddings for, or None."""
        return self.max_length if self.learned_positions else None

    # === Stages ===

    def hidden_states(self, token_ids, training=None):
        """int `(batch, seq)` --> `(batch, seq, d_model)`, the last block's
        output (after the final LayerNorm, if pre-norm)."""
        x = embed(token_ids, self.token_embedding, self.positions,
                  self.embedding_dropout, training=training)
        x, _, _ = apply_blocks(
            self.blocks, x, self.final_norm, use_causal_mask=True,
            padding_mask=ops.not_equal(token_ids, self.pad_id), training=training,
        )
        return x

    def logits(self, hidden_states):
        """`(batch, seq, d_model)` --> float32 `(batch, seq, vocab)` through
        the transposed token embedding."""
        return ops.cast(self.token_embedding(hidden_states, reverse=True), "float32")

    def init_cache(self, batch, max_length):
        """Zero key/value buffers for `decode_step`, one `(k, v)` per block,
        each `(batch, heads, max_length, key_dim)`."""
        dtype = self.blocks[0].compute_dtype
        shape = (batch, self.num_heads, max_length, self.key_dim)
        return [(ops.zeros(shape, dtype), ops.zeros(shape, dtype)) for _ in self.blocks]

    def decode_step(self, token_ids, cache, index):
        """Runs the tokens at positions `index ..` with the cache.

        Args:
            token_ids: int `(batch, step_len)`.
            cache: from `init_cache` or a previous `decode_step`.
            index: int scalar, the position of the first token.

        Returns:
            `(logits, cache)`: float32 `(batch, step_len, vocab)` and the
            cache with these positions' keys and values written in.
        """
        x = embed(token_ids, self.token_embedding, self.positions,
                  self.embedding_dropout, start_index=index, training=False)
        per_block = [{"self_attention_cache": kv} for kv in cache]
        x, _, cache = apply_blocks(
            self.blocks, x, self.final_norm, per_block=per_block,
            cache_index=index, training=False,
        )
        return self.logits(x), cache

    def generate(self, prompts, max_length=None, sampler="greedy",
                 stop_token_ids="auto", use_cache=True):
        """Continues `prompts`; see `keras_transformer.decoding.generate`."""
        from keras_transformer.decoding.generation import generate

        return generate(self, prompts, max_length, sampler, stop_token_ids, use_cache)
