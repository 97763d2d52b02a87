"""One encoder layer (paper section 3.1)."""

import keras

from keras_transformer.layers.feed_forward import FeedForward
from keras_transformer.layers.multi_head_attention import MultiHeadAttention
from keras_transformer.layers.sublayer import sublayer_input, sublayer_output
from keras_transformer.validation import check_positive_int, check_rate


@keras.saving.register_keras_serializable(package="keras_transformer")
class EncoderBlock(keras.layers.Layer):
    """Self-attention then a feed-forward network, each with a residual.

    Section 3.1: every sub-layer is wrapped as
    `LayerNorm(x + Dropout(Sublayer(x)))` (post-norm, the paper's choice and
    the default). `norm_first=True` gives the pre-norm variant
    `x + Dropout(Sublayer(LayerNorm(x)))`, which then needs a final
    LayerNorm on top of the stack (the `Transformer` adds it).

    Mask contract: `padding_mask` bool `(batch, seq)`, True = real token;
    padded keys are never attended to.

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
        **kwargs: passed to `keras.layers.Layer`.

    Call arguments:
        encoder_sequence: `(batch, seq, d_model)`.
        padding_mask: bool `(batch, seq)` or None.
        return_attention_scores: bool, also return the self-attention
            weights `(batch, heads, seq, seq)`.
        training: bool.

    Returns:
        `(batch, seq, d_model)`, and the weights if requested.

    Example:
    >>> block = EncoderBlock(num_heads=8, key_dim=64, d_ff=2048)
    >>> block(keras.ops.ones((2, 7, 512))).shape
    (2, 7, 512)
    """

    def __init__(
        self,
        num_heads,
        key_dim,
        d_ff,
        value_dim=None,
        dropout_rate=0.1,
        norm_first=False,
        layer_norm_epsilon=1e-6,
        attention_dropout=0.0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int("num_heads", num_heads)
        check_positive_int("key_dim", key_dim)
        check_positive_int("d_ff", d_ff)
        check_rate("dropout_rate", dropout_rate)
        check_rate("attention_dropout", attention_dropout)
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.value_dim = value_dim
        self.d_ff = d_ff
        self.dropout_rate = dropout_rate
        self.norm_first = norm_first
        self.layer_norm_epsilon = layer_norm_epsilon
        self.attention_dropout = attention_dropout

    def _norm(self, name):
        return keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, name=name, dtype=self.dtype_policy
        )

    def build(self, encoder_sequence_shape):
        self.self_attention = MultiHeadAttention(
            self.num_heads, self.key_dim, self.value_dim,
            dropout=self.attention_dropout, name="self_attention",
            dtype=self.dtype_policy,
        )
        self.self_attention.build(encoder_sequence_shape, encoder_sequence_shape)
        self.self_attention_norm = self._norm("self_attention_norm")
        self.self_attention_norm.build(encoder_sequence_shape)
        self.feed_forward = FeedForward(
            self.d_ff, name="feed_forward", dtype=self.dtype_policy
        )
        self.feed_forward.build(encoder_sequence_shape)
        self.feed_forward_norm = self._norm("feed_forward_norm")
        self.feed_forward_norm.build(encoder_sequence_shape)
        self.dropout = keras.layers.Dropout(
            self.dropout_rate, dtype=self.dtype_policy
        )
        self.built = True

    def call(
        self,
        encoder_sequence,
        padding_mask=None,
        return_attention_scores=False,
        training=None,
    ):
        x = encoder_sequence  # (batch, seq, d_model)
        h = sublayer_input(x, self.self_attention_norm, self.norm_first)
        attended = self.self_attention(
            h, h, padding_mask=padding_mask,
            return_attention_scores=return_attention_scores, training=training,
        )
        if return_attention_scores:
            attended, weights = attended
        x = sublayer_output(
            x, attended, self.self_attention_norm, self.dropout,
            self.norm_first, training,
        )
        h = sublayer_input(x, self.feed_forward_norm, self.norm_first)
        x = sublayer_output(
            x, self.feed_forward(h), self.feed_forward_norm, self.dropout,
            self.norm_first, training,
        )
        return (x, weights) if return_attention_scores else x

    def compute_output_shape(self, encoder_sequence_shape):
        return encoder_sequence_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "key_dim": self.key_dim,
                "value_dim": self.value_dim,
                "d_ff": self.d_ff,
                "dropout_rate": self.dropout_rate,
                "norm_first": self.norm_first,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "attention_dropout": self.attention_dropout,
            }
        )
        return config
