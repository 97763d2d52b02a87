"""One decoder layer (paper section 3.1)."""

import keras

from keras_transformer.layers.block_base import BlockBase


@keras.saving.register_keras_serializable(package="keras_transformer")
class DecoderBlock(BlockBase):
    """Masked self-attention, encoder-decoder attention, feed-forward.

    Section 3.1: the decoder layer adds a third sub-layer between the two of
    the encoder layer, attention whose queries come from the decoder and
    whose keys and values are the encoder output. Its self-attention is
    causal: position `i` sees only positions `<= i` (the block makes this
    mask itself). Each sub-layer is `LayerNorm(x + Dropout(Sublayer(x)))`
    (post-norm, default) or pre-norm with `norm_first=True`.

    Mask contract: `decoder_padding_mask` bool `(batch, tgt_len)` and
    `encoder_padding_mask` bool `(batch, src_len)`, True = real token. They
    are ANDed with the causal mask; padded keys are never attended to.

    Incremental decoding: pass `self_attention_cache=(k, v)` (each
    `(batch, heads, max_len, head_dim)`), `cache_index` (where the new
    tokens go) and `cross_attention_cache` (from
    `self.cross_attention.compute_cache(encoder_sequence)`); the block
    then also returns the updated self-attention cache.

    Args:
        num_heads: int, `h`.
        key_dim: int, `d_k`.
        d_ff: int, the feed-forward inner width.
        value_dim: int, `d_v`. Defaults to `key_dim`.
        dropout_rate: float in `[0, 1)`, `P_drop` on every sub-layer output.
        norm_first: bool, pre-norm instead of the paper's post-norm.
        layer_norm_epsilon: float, added to the LayerNorm variance.
        attention_dropout: float in `[0, 1)`, dropout on attention weights.
        activation: the feed-forward activation, "relu" (paper), "gelu"
            or `gelu_approximate`.
        gated: bool, the feed-forward network's gated form (`FeedForward`).
        **kwargs: passed to `keras.layers.Layer`.

    Call arguments:
        decoder_sequence: `(batch, tgt_len, d_model)`.
        encoder_sequence: `(batch, src_len, d_model)`; may be None when
            `cross_attention_cache` is given.
        decoder_padding_mask, encoder_padding_mask: see the mask contract.
        self_attention_cache, cross_attention_cache, cache_index: see
            incremental decoding.
        return_attention_scores: bool, also return
            `(self_weights, cross_weights)`, each
            `(batch, heads, tgt_len, k_len)`.
        training: bool.

    Returns:
        `(batch, tgt_len, d_model)`; then the pair of attention weights if
        requested; then the updated self-attention cache if one was given.

    Example:
    >>> block = DecoderBlock(num_heads=8, key_dim=64, d_ff=2048)
    >>> block(keras.ops.ones((2, 5, 512)), keras.ops.ones((2, 7, 512))).shape
    (2, 5, 512)
    """

    def build(self, decoder_sequence_shape, encoder_sequence_shape=None):
        self._build_sublayers(
            decoder_sequence_shape, encoder_sequence_shape or decoder_sequence_shape
        )

    def call(self, decoder_sequence, encoder_sequence=None,
             decoder_padding_mask=None, encoder_padding_mask=None,
             self_attention_cache=None, cross_attention_cache=None,
             cache_index=None, return_attention_scores=False, training=None):
        # Masked (causal) self-attention. --> (batch, tgt_len, d_model)
        x, self_extras = self._self_attention_sublayer(
            decoder_sequence, decoder_padding_mask, True,
            return_attention_scores, training, self_attention_cache, cache_index,
        )
        # Encoder-decoder attention: queries from x, keys/values from the
        # encoder output (or its precomputed projections).
        x, cross_extras = self._residual(
            x, self.cross_attention_norm,
            lambda h: self.cross_attention(
                h, encoder_sequence, padding_mask=encoder_padding_mask,
                return_attention_scores=return_attention_scores,
                cache=cross_attention_cache, training=training,
            ),
            training,
        )
        # Position-wise feed-forward.
        x, _ = self._residual(x, self.feed_forward_norm, self.feed_forward, training)

        results = (x,)  # then the weights, then the cache, when asked for
        if return_attention_scores:
            results += ((self_extras[0], cross_extras[0]),)
        if self_attention_cache is not None:
            results += (self_extras[-1],)
        return results[0] if len(results) == 1 else results

    def compute_output_shape(
        self, decoder_sequence_shape, encoder_sequence_shape=None
    ):
        return decoder_sequence_shape
