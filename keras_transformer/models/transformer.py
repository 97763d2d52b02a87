"""The encoder-decoder Transformer (paper section 3, Figure 1)."""

import keras
from keras import ops

from keras_transformer.checks import (
    check_positive_int,
    check_rate,
    check_special_ids,
    head_width,
)
from keras_transformer.layers.decoder_block import DecoderBlock
from keras_transformer.layers.dropout import Dropout
from keras_transformer.layers.encoder_block import EncoderBlock
from keras_transformer.layers.position_wise_dense import PositionWiseDense
from keras_transformer.layers.positional_encoding import (
    SINUSOID_STDDEV,
    PositionalEncoding,
)
from keras_transformer.layers.token_embedding import TokenEmbedding
from keras_transformer.models.block_stack import apply_blocks, build_stack, embed
from keras_transformer.models.model_base import ModelBase
from keras_transformer.models.presets import PRESETS
from keras_transformer.special_tokens import BOS_ID, EOS_ID, PAD_ID


@keras.saving.register_keras_serializable(package="keras_transformer")
class Transformer(ModelBase):
    """The Transformer of "Attention Is All You Need", as a functional model.

    Figure 1 of the paper: token embeddings times `sqrt(d_model)` plus
    positional encodings (with dropout) feed a stack of `num_layers`
    `EncoderBlock`s and a stack of `num_layers` `DecoderBlock`s (unless
    `num_decoder_layers` sets the decoder's own depth); the decoder
    output is projected to vocabulary logits by the transposed embedding
    matrix (section 3.4). With a shared vocabulary (the default) one matrix
    serves the source embedding, the target embedding and the pre-softmax
    projection.

    The model is a graph of the layers in `keras_transformer.layers`, so
    `summary()`, `plot_model()` and `.keras` saving see every block; it is
    rebuilt from its constructor arguments (`get_config`). The graph is
    `encode` then `decode`, the same methods decoding calls, so each stage
    (embedding, the block stacks, the logits) is written once;
    `decode_step` runs the decoder one position at a time with a cache.

    Mask contract: token id `pad_id` (0) is padding. Padded source tokens are
    hidden from encoder self-attention and from encoder-decoder attention;
    padded target tokens from decoder self-attention, which is also causal.
    Logits at padded target positions are computed but meaningless: the loss
    ignores them.

    Args:
        vocabulary_size: int, the (shared) vocabulary size; with
            `target_vocabulary_size` set, the source vocabulary size.
        num_layers: int, `N`, layers in each stack. Default 6.
        d_model: int, the model width. Default 512.
        num_heads: int, `h`. Default 8.
        d_ff: int, the feed-forward inner width. Default 2048.
        key_dim: int, `d_k`. Default `d_model // num_heads`.
        value_dim: int, `d_v`. Default `key_dim`.
        dropout_rate: float in `[0, 1)`, `P_drop`. Default 0.1.
        max_length: int, the longest sequence of a learned positional
            table, and the default decoding buffer. Default 512.
        target_vocabulary_size: int or None. None (default) shares one
            vocabulary and one embedding matrix between source and target;
            an int gives the target its own vocabulary and embedding.
        tie_embeddings: bool, use the target embedding matrix as the
            pre-softmax projection (paper). False adds a separate
            `(d_model, target vocabulary)` projection without bias.
        norm_first: bool, pre-norm blocks (plus a final LayerNorm on each
            stack) instead of the paper's post-norm.
        learned_positions: bool, learned positional embeddings (Table 3
            row E) instead of sinusoids.
        attention_dropout: float in `[0, 1)`, dropout on attention weights
            (0 in the paper).
        layer_norm_epsilon: float. Default 1e-6.
        num_decoder_layers: int or None, the decoder stack's own depth
            (None: `num_layers`, as in the paper). On the demo's corpus
            one decoder layer learned far less than two, and one encoder
            layer as much as two (docs/RESULTS.md).
        activation: the feed-forward activation: "relu" (paper), "gelu",
            "silu" or any Keras activation.
        gated: bool, the feed-forward network's gated form (`FeedForward`;
            with "silu", SwiGLU). Default False, the paper's.
        pad_id, bos_id, eos_id: int, the padding, start and end token ids
            (`keras_transformer.special_tokens`: 0, 1, 2); the searches
            read them from the model.
        dtype: a dtype or `keras.DTypePolicy` (e.g. "mixed_bfloat16").
        **kwargs: passed to `keras.Model` (e.g. `name`).

    Inputs:
        `{"encoder_token_ids": int (batch, src_len),
          "decoder_token_ids": int (batch, tgt_len)}`.

    Returns:
        float32 logits `(batch, tgt_len, target vocabulary size)`.

    Example:
    >>> model = Transformer.from_preset("tiny", vocabulary_size=1000)
    >>> logits = model({"encoder_token_ids": keras.ops.ones((2, 7), "int32"),
    ...                 "decoder_token_ids": keras.ops.ones((2, 5), "int32")})
    >>> logits.shape
    (2, 5, 1000)
    """

    # `from_preset("tiny" | "base" | "big" | a Table 3 row such as "C6")`.
    presets = PRESETS

    def __init__(
        self,
        vocabulary_size,
        num_layers=6,
        d_model=512,
        num_heads=8,
        d_ff=2048,
        key_dim=None,
        value_dim=None,
        dropout_rate=0.1,
        max_length=512,
        target_vocabulary_size=None,
        tie_embeddings=True,
        norm_first=False,
        learned_positions=False,
        attention_dropout=0.0,
        layer_norm_epsilon=1e-6,
        num_decoder_layers=None,
        activation="relu",
        gated=False,
        pad_id=PAD_ID,
        bos_id=BOS_ID,
        eos_id=EOS_ID,
        dtype=None,
        **kwargs,
    ):
        for name, value in [
            ("vocabulary_size", vocabulary_size),
            ("num_layers", num_layers),
            ("d_model", d_model),
            ("num_heads", num_heads),
            ("d_ff", d_ff),
            ("max_length", max_length),
        ]:
            check_positive_int(name, value)
        if num_decoder_layers is not None:
            check_positive_int("num_decoder_layers", num_decoder_layers)
        if key_dim is None:
            key_dim = head_width(d_model, num_heads)
        check_positive_int("key_dim", key_dim)
        value_dim = key_dim if value_dim is None else value_dim
        check_positive_int("value_dim", value_dim)
        if target_vocabulary_size is not None:
            check_positive_int("target_vocabulary_size", target_vocabulary_size)
        check_rate("dropout_rate", dropout_rate)
        check_rate("attention_dropout", attention_dropout)
        check_special_ids(
            pad_id, bos_id, eos_id,
            min(vocabulary_size, target_vocabulary_size or vocabulary_size),
        )

        # === Layers ===
        self.source_embedding = TokenEmbedding(
            vocabulary_size, d_model, name="token_embedding", dtype=dtype
        )
        self.target_embedding = self.source_embedding
        if target_vocabulary_size is not None:
            self.target_embedding = TokenEmbedding(
                target_vocabulary_size, d_model,
                name="target_token_embedding", dtype=dtype,
            )
        self.output_projection = None
        if not tie_embeddings:
            self.output_projection = PositionWiseDense(
                target_vocabulary_size or vocabulary_size, use_bias=False,
                name="output_projection", dtype=dtype,
            )
        self.encoder_positions, self.decoder_positions = (
            PositionalEncoding(
                max_length, learned=learned_positions,
                # A learned table starts at the scale of the sinusoid it
                # replaces, beside token embeddings of unit scale.
                embeddings_initializer=keras.initializers.RandomNormal(
                    stddev=SINUSOID_STDDEV),
                name=f"{side}_positional_encoding", dtype=dtype,
            )
            for side in ("encoder", "decoder")
        )
        self.embedding_dropout = Dropout(
            dropout_rate, name="embedding_dropout", dtype=dtype
        )
        block_kwargs = dict(
            num_heads=num_heads, key_dim=key_dim, value_dim=value_dim,
            d_ff=d_ff, dropout_rate=dropout_rate, attention_dropout=attention_dropout,
            activation=activation, gated=gated,
        )
        self.encoder_blocks, self.encoder_norm = build_stack(
            EncoderBlock, num_layers, "encoder_block", "encoder_norm", norm_first,
            layer_norm_epsilon, dtype, **block_kwargs)
        self.decoder_blocks, self.decoder_norm = build_stack(
            DecoderBlock, num_decoder_layers or num_layers, "decoder_block", "decoder_norm",
            norm_first, layer_norm_epsilon, dtype, **block_kwargs)

        # === Config (read by the stages below) ===
        self.vocabulary_size = vocabulary_size
        self.num_layers = num_layers
        self.num_decoder_layers = num_decoder_layers
        self.d_model = d_model
        self.num_heads = num_heads
        self.d_ff = d_ff
        self.key_dim = key_dim
        self.value_dim = value_dim
        self.dropout_rate = dropout_rate
        self.max_length = max_length
        self.target_vocabulary_size = target_vocabulary_size
        self.tie_embeddings = tie_embeddings
        self.norm_first = norm_first
        self.learned_positions = learned_positions
        self.attention_dropout = attention_dropout
        self.layer_norm_epsilon = layer_norm_epsilon
        self.activation = activation
        self.gated = gated
        self.pad_id = pad_id
        self.bos_id = bos_id
        self.eos_id = eos_id

        # === Functional model: the same stages decoding calls ===
        encoder_token_ids = keras.Input(
            shape=(None,), dtype="int32", name="encoder_token_ids"
        )
        decoder_token_ids = keras.Input(
            shape=(None,), dtype="int32", name="decoder_token_ids"
        )
        encoder_output, encoder_padding_mask = self.encode(encoder_token_ids)
        logits = self.decode(decoder_token_ids, encoder_output, encoder_padding_mask)
        super().__init__(
            inputs={
                "encoder_token_ids": encoder_token_ids,
                "decoder_token_ids": decoder_token_ids,
            },
            outputs=logits,
            dtype=dtype,
            **kwargs,
        )

    @property
    def max_decoder_length(self):
        """The most decoder positions there are embeddings for: the learned
        table's length, or None (sinusoids extend to any length)."""
        return self.max_length if self.learned_positions else None

    @property
    def output_vocabulary_size(self):
        """The number of logits per position."""
        return self.target_vocabulary_size or self.vocabulary_size

    # === Stages: the functional graph and decoding both call these ===

    def _embed(self, token_ids, embedding, positions, start_index=0, training=None):
        """Scaled embeddings plus positions, then dropout (`embed`)."""
        return embed(
            token_ids, embedding, positions, self.embedding_dropout,
            start_index=start_index, training=training,
        )

    def _logits(self, y):
        """`(batch, len, d_model)` --> float32 `(batch, len, vocab)`: the
        transposed target embedding (section 3.4) or the untied projection."""
        if self.tie_embeddings:
            logits = self.target_embedding(y, reverse=True)
        else:
            logits = self.output_projection(y)
        return ops.cast(logits, "float32")

    def encode(self, encoder_token_ids, return_attention_scores=False, training=None):
        """Runs the encoder stack.

        Args:
            encoder_token_ids: int `(batch, src_len)`.
            return_attention_scores: bool, also return the list of
                self-attention weights, one `(batch, heads, src_len, src_len)`
                per layer.
            training: bool or None (dropout only when True).

        Returns:
            `(encoder_output, encoder_padding_mask)`: `(batch, src_len,
            d_model)` and bool `(batch, src_len)`; plus the weights if
            requested.
        """
        padding_mask = ops.not_equal(encoder_token_ids, self.pad_id)
        x = self._embed(
            encoder_token_ids, self.source_embedding, self.encoder_positions,
            training=training,
        )
        x, scores, _ = apply_blocks(
            self.encoder_blocks, x, self.encoder_norm, padding_mask=padding_mask,
            return_attention_scores=return_attention_scores, training=training,
        )
        if return_attention_scores:
            return x, padding_mask, scores
        return x, padding_mask

    def decode(self, decoder_token_ids, encoder_output, encoder_padding_mask,
               return_attention_scores=False, training=None):
        """Runs the decoder stack over whole target prefixes.

        Args:
            decoder_token_ids: int `(batch, tgt_len)`.
            encoder_output: `(batch, src_len, d_model)` from `encode`.
            encoder_padding_mask: bool `(batch, src_len)` from `encode`.
            return_attention_scores: bool, also return the lists of self-
                and cross-attention weights, one entry per layer.
            training: bool or None (dropout only when True).

        Returns:
            float32 logits `(batch, tgt_len, vocab)`, plus
            `(self_scores, cross_scores)` if requested.
        """
        y = self._embed(
            decoder_token_ids, self.target_embedding, self.decoder_positions,
            training=training,
        )
        y, scores, _ = apply_blocks(
            self.decoder_blocks, y, self.decoder_norm,
            encoder_sequence=encoder_output,
            decoder_padding_mask=ops.not_equal(decoder_token_ids, self.pad_id),
            encoder_padding_mask=encoder_padding_mask,
            return_attention_scores=return_attention_scores, training=training,
        )
        logits = self._logits(y)
        if return_attention_scores:
            return logits, tuple(map(list, zip(*scores)))
        return logits

    def init_cache(self, encoder_output, max_length):
        """Builds the decoding cache for `decode_step`.

        Cross-attention keys and values are projected once from the encoder
        output; self-attention buffers are preallocated zeros of a fixed
        shape, so a compiled decoding loop traces once.

        Args:
            encoder_output: `(batch, src_len, d_model)`.
            max_length: int, the decoder positions to reserve.

        Returns:
            A dict `{"self": [(k, v)] * decoder layers, "cross": [(k, v)]
            * decoder layers}`; self buffers are `(batch, heads, max_length,
            head_dim)`, cross ones `(batch, heads, src_len, head_dim)`.
        """
        batch = ops.shape(encoder_output)[0]
        dtype = self.decoder_blocks[0].compute_dtype
        self_cache, cross_cache = [], []
        for block in self.decoder_blocks:
            keys = ops.zeros((batch, self.num_heads, max_length, self.key_dim), dtype)
            values = ops.zeros(
                (batch, self.num_heads, max_length, self.value_dim), dtype
            )
            self_cache.append((keys, values))
            cross_cache.append(block.cross_attention.compute_cache(encoder_output))
        return {"self": self_cache, "cross": cross_cache}

    def decode_step(self, decoder_token_ids, cache, index, encoder_padding_mask):
        """Decodes the tokens at `index` with the cache (inference).

        Args:
            decoder_token_ids: int `(batch, step_len)`, the tokens at
                positions `index .. index + step_len - 1` (usually one).
            cache: from `init_cache` or a previous `decode_step`.
            index: int scalar, the position of the first token.
            encoder_padding_mask: bool `(batch, src_len)`.

        Returns:
            `(logits, cache)`: float32 `(batch, step_len, vocab)` and the
            cache with this step's keys and values written in.
        """
        y = self._embed(
            decoder_token_ids, self.target_embedding, self.decoder_positions,
            start_index=index, training=False,
        )
        per_block = [
            {"self_attention_cache": self_kv, "cross_attention_cache": cross_kv}
            for self_kv, cross_kv in zip(cache["self"], cache["cross"])
        ]
        y, _, self_cache = apply_blocks(
            self.decoder_blocks, y, self.decoder_norm, per_block=per_block,
            encoder_padding_mask=encoder_padding_mask, cache_index=index,
            training=False,
        )
        return self._logits(y), {"self": self_cache, "cross": cache["cross"]}
