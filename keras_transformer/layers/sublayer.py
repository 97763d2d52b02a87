"""The residual connection around every sub-layer (paper section 3.1).

Post-norm (the paper): `LayerNorm(x + Dropout(Sublayer(x)))`.
Pre-norm (option):     `x + Dropout(Sublayer(LayerNorm(x)))`.

A block calls `sublayer_input` to get what its sub-layer reads, runs the
sub-layer, then `sublayer_output` to add the residual.
"""

import keras

from keras_transformer.layers.dropout import Dropout
from keras_transformer.layers.feed_forward import FeedForward
from keras_transformer.layers.multi_head_attention import MultiHeadAttention
from keras_transformer.validation import check_positive_int, check_rate


def sublayer_input(x, norm, norm_first):
    """What the sub-layer sees: `LayerNorm(x)` in pre-norm, else `x`."""
    return norm(x) if norm_first else x


def sublayer_output(x, y, norm, dropout, norm_first, training):
    """`x + Dropout(y)`, then `LayerNorm` in post-norm."""
    x = x + dropout(y, training=training)
    return x if norm_first else norm(x)


class BlockBase(keras.layers.Layer):
    """What `EncoderBlock` and `DecoderBlock` share: their arguments (see
    their docstrings), config, and builders of built sub-layers."""

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
        if value_dim is not None:
            check_positive_int("value_dim", value_dim)
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

    def _attention(self, name, query_shape, value_shape):
        attention = MultiHeadAttention(
            self.num_heads, self.key_dim, self.value_dim,
            dropout=self.attention_dropout, name=name, dtype=self.dtype_policy,
        )
        attention.build(query_shape, value_shape)
        return attention

    def _norm(self, name, shape):
        norm = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, name=name, dtype=self.dtype_policy
        )
        norm.build(shape)
        return norm

    def _feed_forward(self, shape):
        feed_forward = FeedForward(self.d_ff, name="feed_forward", dtype=self.dtype_policy)
        feed_forward.build(shape)
        return feed_forward

    def _dropout(self):
        return Dropout(self.dropout_rate, dtype=self.dtype_policy)

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
