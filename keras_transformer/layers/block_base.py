"""What the encoder and decoder blocks share: their arguments, their
sub-layers and the residual connection around each (paper section 3.1)."""

import keras

from keras_transformer.checks import check_attention_sizes, check_positive_int, check_rate
from keras_transformer.layers.dropout import Dropout
from keras_transformer.layers.feed_forward import FeedForward
from keras_transformer.layers.multi_head_attention import MultiHeadAttention
from keras_transformer.layers.position_wise_dense import states_at


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
        activation="relu",
        gated=False,
        **kwargs,
    ):
        check_attention_sizes(num_heads, key_dim, value_dim)
        check_positive_int("d_ff", d_ff)
        check_rate("dropout_rate", dropout_rate)
        check_rate("attention_dropout", attention_dropout)
        super().__init__(**kwargs)
        # The sub-layers' sizes (section 3.2-3.3).
        self.d_ff = d_ff
        self.activation = activation
        self.gated = gated
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.value_dim = value_dim
        # The residual connections (section 3.1, 5.4).
        self.norm_first = norm_first
        self.layer_norm_epsilon = layer_norm_epsilon
        self.dropout_rate = dropout_rate
        self.attention_dropout = attention_dropout

    def _build_sublayers(self, shape, encoder_sequence_shape=None):
        """Self-attention, then cross-attention over an encoder output of
        `encoder_sequence_shape` if given, then the feed-forward network;
        each with its LayerNorm; one dropout for every residual."""
        self.self_attention = self._attention("self_attention", shape, shape)
        self.self_attention_norm = self._norm("self_attention_norm", shape)
        if encoder_sequence_shape is not None:
            self.cross_attention = self._attention(
                "cross_attention", shape, encoder_sequence_shape
            )
            self.cross_attention_norm = self._norm("cross_attention_norm", shape)
        self.feed_forward = self._feed_forward(shape)
        self.feed_forward_norm = self._norm("feed_forward_norm", shape)
        self.dropout = self._dropout()
        self.built = True

    def _residual(self, x, norm, sublayer, training):
        """The residual connection around one sub-layer.

        Post-norm (the paper): `LayerNorm(x + Dropout(Sublayer(x)))`.
        Pre-norm (`norm_first`): `x + Dropout(Sublayer(LayerNorm(x)))`.

        Args:
            x: `(batch, seq, d_model)`.
            norm: the sub-layer's LayerNorm.
            sublayer: a function of `(batch, seq, d_model)` returning the
                sub-layer's output, or a tuple of it and extras (attention
                weights, a cache).

        Returns:
            `(x, extras)`: the new `(batch, seq, d_model)` and the tuple of
            extras (empty if none).
        """
        outputs = sublayer(norm(x) if self.norm_first else x)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        y = outputs[0]
        if training:  # not called otherwise: a layer call is ~60 us in eager decoding
            y = self.dropout(y, training=training)
        x = x + y
        return (x if self.norm_first else norm(x)), outputs[1:]

    def _self_attention_sublayer(self, x, padding_mask, use_causal_mask,
                                 return_attention_scores, training, cache=None,
                                 cache_index=None, query_positions=None):
        """`x` after its self-attention sub-layer, residual included;
        returns `(x, extras)` as `_residual` (the weights, then the updated
        cache, when asked for).

        With `query_positions` (int `(batch, n)`), only those positions
        query: the result is `(batch, n, d_model)`, while keys and values
        still come from every position of `x`."""
        if query_positions is None:
            memory, queries = None, x
        else:
            memory = self.self_attention_norm(x) if self.norm_first else x
            queries = states_at(x, query_positions)
        return self._residual(
            queries, self.self_attention_norm,
            lambda h: self.self_attention(
                h, h if memory is None else memory, padding_mask=padding_mask,
                use_causal_mask=use_causal_mask,
                return_attention_scores=return_attention_scores, cache=cache,
                cache_index=cache_index, training=training,
            ),
            training,
        )

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
        feed_forward = FeedForward(
            self.d_ff, activation=self.activation, gated=self.gated, name="feed_forward",
            dtype=self.dtype_policy,
        )
        feed_forward.build(shape)
        return feed_forward

    def _dropout(self):
        return Dropout(self.dropout_rate, dtype=self.dtype_policy)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "d_ff": self.d_ff,
                "activation": keras.activations.serialize(
                    keras.activations.get(self.activation)
                ),
                "gated": self.gated,
                "num_heads": self.num_heads,
                "key_dim": self.key_dim,
                "value_dim": self.value_dim,
                "dropout_rate": self.dropout_rate,
                "norm_first": self.norm_first,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "attention_dropout": self.attention_dropout,
            }
        )
        return config
