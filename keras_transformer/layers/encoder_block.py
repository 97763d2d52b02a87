"""One encoder layer (paper section 3.1)."""

import keras

from keras_transformer.layers.block_base import BlockBase


@keras.saving.register_keras_serializable(package="keras_transformer")
class EncoderBlock(BlockBase):
    """Self-attention then a feed-forward network, each with a residual.

    Section 3.1: every sub-layer is wrapped as
    `LayerNorm(x + Dropout(Sublayer(x)))` (post-norm, the paper's choice and
    the default). `norm_first=True` gives the pre-norm variant
    `x + Dropout(Sublayer(LayerNorm(x)))`, which then needs a final
    LayerNorm on top of the stack (the `Transformer` adds it).

    Mask contract: `padding_mask` bool `(batch, seq)`, True = real token;
    padded keys are never attended to.

    A stack of these with `use_causal_mask=True` is a decoder without
    cross-attention (GPT's block). It then decodes incrementally as
    `DecoderBlock` does: given `self_attention_cache=(k, v)` (each
    `(batch, heads, max_len, head_dim)`) and `cache_index` (where the new
    tokens go), it also returns the updated cache.

    Args:
        num_heads: int, `h`.
        key_dim: int, `d_k`.
        value_dim: int, `d_v`. Defaults to `key_dim`.
        d_ff: int, the feed-forward inner width.
        dropout_rate: float in `[0, 1)`, `P_drop` on every sub-layer output.
        norm_first: bool, pre-norm instead of the paper's post-norm.
        layer_norm_epsilon: float, added to the LayerNorm variance.
        attention_dropout: float in `[0, 1)`, dropout on the attention
            weights (0 in the paper).
        activation: the feed-forward activation, "relu" (paper), "gelu"
            or `gelu_approximate`.
        gated: bool, the feed-forward network's gated form (`FeedForward`).
        **kwargs: passed to `keras.layers.Layer`.

    Call arguments:
        encoder_sequence: `(batch, seq, d_model)`.
        padding_mask: bool `(batch, seq)` or None.
        use_causal_mask: bool, position `i` sees only positions `<= i`.
        self_attention_cache, cache_index: see incremental decoding above.
        query_positions: int `(batch, n)` or None. Compute the output at
            these positions only (the keys and values still come from every
            position), as the last block of a model that reads a few
            positions (BERT's masked tokens, its first token) needs.
            Not with a causal mask or a cache.
        return_attention_scores: bool, also return the self-attention
            weights `(batch, heads, seq, seq)`.
        training: bool.

    Returns:
        `(batch, seq, d_model)` (`(batch, n, d_model)` with
        `query_positions`); then the weights if requested; then the
        updated cache if one was given.

    Example:
    >>> block = EncoderBlock(num_heads=8, key_dim=64, d_ff=2048)
    >>> block(keras.ops.ones((2, 7, 512))).shape
    (2, 7, 512)
    """

    def build(self, encoder_sequence_shape):
        self._build_sublayers(encoder_sequence_shape)

    def call(self, encoder_sequence, padding_mask=None, use_causal_mask=False,
             self_attention_cache=None, cache_index=None,
             return_attention_scores=False, query_positions=None, training=None):
        if query_positions is not None and (use_causal_mask or self_attention_cache is not None):
            raise ValueError(
                "`query_positions` needs every position's keys and values at "
                "once: it works without a causal mask or a cache. Received: "
                f"use_causal_mask={use_causal_mask}, self_attention_cache "
                f"{'given' if self_attention_cache is not None else 'None'}"
            )
        # --> (batch, seq or n, d_model)
        x, extras = self._self_attention_sublayer(
            encoder_sequence, padding_mask, use_causal_mask,
            return_attention_scores, training, self_attention_cache, cache_index,
            query_positions,
        )
        x, _ = self._residual(x, self.feed_forward_norm, self.feed_forward, training)
        # Then the weights, then the cache, when asked for.
        results = (x, *extras)
        return results[0] if len(results) == 1 else results

    def compute_output_shape(self, encoder_sequence_shape, query_positions_shape=None):
        if query_positions_shape is None:
            return encoder_sequence_shape
        return tuple(query_positions_shape) + tuple(encoder_sequence_shape[-1:])
