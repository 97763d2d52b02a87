"""Multi-head scaled dot-product attention (paper section 3.2)."""

import math

import keras
from keras import ops

from keras_transformer.checks import check_attention_sizes, check_positive_int, check_rate
from keras_transformer.decoding.compiled_search import write_cache
from keras_transformer.layers.dropout import Dropout
from keras_transformer.layers.position_wise_dense import PositionWiseDense, position_wise_matmul

# Added to the scores of masked positions. Finite and far below any real
# score, and representable in float16 (max 65504) and bfloat16.
MASK_VALUE = -3.0e4


def per_head_glorot_scale(d_in, d_out, per_head_shape):
    """The `VarianceScaling(scale, "fan_avg")` scale that gives a `(d_in,
    d_out)` kernel the variance Glorot gives it laid out per head,
    `per_head_shape` (`(d_in, h, d_k)` or `(h, d_v, d_out)`), when the
    leading axes count as a receptive field, as a convolution's do: both
    fans are multiplied by them, `2 / (d_in (h + d_k))` for `W^Q`."""
    receptive = math.prod(per_head_shape[:-2])
    fan_in, fan_out = per_head_shape[-2] * receptive, per_head_shape[-1] * receptive
    return (d_in + d_out) / (fan_in + fan_out)


def _heads_first(x):
    """(batch, len, heads, dim) --> (batch, heads, len, dim)."""
    return ops.transpose(x, (0, 2, 1, 3))


@keras.saving.register_keras_serializable(package="keras_transformer")
class MultiHeadAttention(keras.layers.Layer):
    """Multi-head attention, `softmax(Q K^T / sqrt(d_k)) V` over `h` heads.

    Implements section 3.2 of "Attention Is All You Need": the query, key and
    value are projected `h` times with learned matrices `W^Q_i` (to `d_k`),
    `W^K_i` (to `d_k`) and `W^V_i` (to `d_v`), scaled dot-product attention is
    applied to each head, and the concatenated heads are projected by `W^O`
    back to the query's width. All four projections have biases. In
    self-attention (`value` and `key` are `query` or omitted) the three
    input projections run as one matmul with the kernels side by side, and
    the key and value projections of one memory (`key` is `value` or
    omitted, as in cross-attention) as another; a cached decoding step,
    a few rows, runs them one by one. Every projection is a
    `position_wise_matmul` (a 1 x 1 convolution on PyTorch's CPU).

    Mask contract (shared by every layer of this package):
    - `padding_mask`: bool `(batch, k_len)`, True = real key token.
    - `attention_mask`: bool `(batch, q_len, k_len)`, True = may attend.
    - `use_causal_mask=True`: query position `i` attends to keys `<= i`.
    The masks combine with AND. A query row whose keys are all masked attends
    uniformly to all keys instead of producing NaN (in every float dtype).

    Incremental decoding uses `cache=(key_cache, value_cache)`, each
    `(batch, heads, cache_len, head_dim)`, heads before positions: the
    layout the attention matmuls read, so no decoding step transposes a
    cache:
    - with `cache_index` (a scalar int): self-attention. The keys and values
      of `value` (the new tokens, which sit at `cache_index`) are written into
      the cache, and the queries attend to cache positions
      `<= cache_index + i`. The call returns `(output, new_cache)`. (On
      PyTorch with autograd off, as in decoding, the given buffers are
      written in place and returned.)
    - without `cache_index`: the cache holds precomputed keys and values (the
      encoder's, for cross-attention, see `compute_cache`); `value` and `key`
      are ignored and the call returns `(output, cache)`.

    The fused `keras.ops.dot_product_attention` kernel runs unless attention
    scores are requested, attention dropout is active, `d_k != d_v` (which
    the fused kernels do not support) or a cache is read (one query over a
    heads-first cache is two small matmuls); an explicit einsum path with
    the same semantics runs otherwise.

    Args:
        num_heads: int, the number of heads `h`.
        key_dim: int, `d_k`, the width of each query and key head.
        value_dim: int, `d_v`, the width of each value head. Defaults to
            `key_dim`.
        output_dim: int, the width of the output. Defaults to the width of
            the query.
        dropout: float in `[0, 1)`, dropout on the attention weights. The
            paper uses none (0.0, the default).
        kernel_initializer: initializer of the four kernels, or None (the
            default) for Glorot uniform with the fans counted per head
            (`per_head_glorot_scale`): `W^Q`, `W^K` and `W^V` start
            `sqrt((d + h d_k) / (d (h + d_k)))` times (0.24 at `mini`'s
            size, 0.17 at base) and `W^O` 0.63 (0.47) times the plain
            Glorot of their matrices. The paper gives no initialization;
            the 10-minute demo learned faster from this one than from
            plain Glorot (docs/RESULTS.md). `"glorot_uniform"` gives the
            plain one.
        **kwargs: passed to `keras.layers.Layer`.

    Call arguments:
        query: `(batch, q_len, d_query)`.
        value: `(batch, k_len, d_value)`. Defaults to `query`.
        key: `(batch, k_len, d_key)`. Defaults to `value`.
        padding_mask, attention_mask, use_causal_mask: see the mask contract.
        return_attention_scores: bool, also return the attention weights
            `(batch, heads, q_len, k_len)`.
        cache, cache_index: see incremental decoding above.
        training: bool, whether dropout is active.

    Returns:
        `output` `(batch, q_len, output_dim)`; followed by the attention
        weights if `return_attention_scores`, then by the cache if `cache`
        was given.

    Example:
    >>> mha = MultiHeadAttention(num_heads=8, key_dim=64)
    >>> x = keras.random.normal((2, 10, 512))
    >>> mha(x, x, use_causal_mask=True).shape
    (2, 10, 512)
    """

    def __init__(
        self,
        num_heads,
        key_dim,
        value_dim=None,
        output_dim=None,
        dropout=0.0,
        kernel_initializer=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_attention_sizes(num_heads, key_dim, value_dim)
        if output_dim is not None:
            check_positive_int("output_dim", output_dim)
        check_rate("dropout", dropout)
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.value_dim = value_dim
        self.output_dim = output_dim
        self.dropout = dropout
        self.kernel_initializer = (
            None if kernel_initializer is None
            else keras.initializers.get(kernel_initializer))
        self._value_dim = value_dim or key_dim
        self.supports_masking = False

    def build(self, query_shape, value_shape=None, key_shape=None):
        value_shape = value_shape or query_shape
        key_shape = key_shape or value_shape
        d_query, d_key, d_value = query_shape[-1], key_shape[-1], value_shape[-1]
        h, d_k, d_v = self.num_heads, self.key_dim, self._value_dim
        d_out = self.output_dim or d_query

        def dense(name, d_in, d_o, per_head_shape):
            initializer = self.kernel_initializer or keras.initializers.VarianceScaling(
                per_head_glorot_scale(d_in, d_o, per_head_shape), "fan_avg", "uniform")
            layer = PositionWiseDense(d_o, kernel_initializer=initializer, name=name,
                                      dtype=self.dtype_policy)
            layer.build((None, d_in))
            return layer

        self.query_dense = dense("query", d_query, h * d_k, (d_query, h, d_k))  # W^Q
        self.key_dense = dense("key", d_key, h * d_k, (d_key, h, d_k))  # W^K
        self.value_dense = dense("value", d_value, h * d_v, (d_value, h, d_v))  # W^V
        self.output_dense = dense(
            "attention_output", h * d_v, d_out, (h, d_v, d_out))  # W^O
        self.dropout_layer = Dropout(
            self.dropout, dtype=self.dtype_policy
        )
        self.built = True

    def _split_heads(self, x, head_dim):
        # (batch, len, heads * head_dim) --> (batch, len, heads, head_dim)
        batch, length = ops.shape(x)[0], ops.shape(x)[1]
        return ops.reshape(x, (batch, length, self.num_heads, head_dim))

    def _project_fused(self, x, denses, head_dims):
        """Several projections of the same input in one matmul, `x [W_1 |
        W_2 | ...]` (the kernels and biases concatenated), split into heads.

        x: (batch, len, d_in) --> one (batch, len, heads, head_dim) per
        dense, of the matching `head_dims` entry.
        """
        kernel = ops.concatenate([ops.cast(d.kernel, self.compute_dtype) for d in denses], 1)
        bias = ops.concatenate([ops.cast(d.bias, self.compute_dtype) for d in denses], 0)
        fused = position_wise_matmul(x, kernel) + bias  # (batch, len, heads * sum(head_dims))
        widths = [self.num_heads * d for d in head_dims]
        splits = [sum(widths[: i + 1]) for i in range(len(widths) - 1)]
        parts = ops.split(fused, splits, axis=-1)
        return tuple(self._split_heads(p, d) for p, d in zip(parts, head_dims))

    def _project_qkv(self, x):
        """Self-attention's Q, K and V in one matmul.

        x: (batch, len, d_model) --> (batch, len, heads, d_k) twice and
        (batch, len, heads, d_v).
        """
        return self._project_fused(
            x, (self.query_dense, self.key_dense, self.value_dense),
            (self.key_dim, self.key_dim, self._value_dim))

    def _project_kv(self, value, key=None, fused=True):
        """(batch, k_len, d_value), (batch, k_len, d_key) or None (= value)
        --> (batch, k_len, heads, d_k) and (batch, k_len, heads, d_v).
        Keys and values of one memory (the encoder output, in
        cross-attention) are one matmul unless `fused` is False."""
        if fused and (key is None or key is value):
            return self._project_fused(value, (self.key_dense, self.value_dense),
                                       (self.key_dim, self._value_dim))
        key = value if key is None else key
        k = self._split_heads(self.key_dense(key), self.key_dim)
        v = self._split_heads(self.value_dense(value), self._value_dim)
        return k, v

    def compute_cache(self, value, key=None):
        """Projects keys and values once, for attention over a fixed memory.

        Args:
            value: `(batch, k_len, d_value)`.
            key: `(batch, k_len, d_key)`, defaults to `value`.

        Returns:
            `(key_cache, value_cache)`, `(batch, heads, k_len, d_k)` and
            `(batch, heads, k_len, d_v)`.
        """
        k, v = self._project_kv(value, key)
        return _heads_first(k), _heads_first(v)

    def _build_mask(
        self, q_len, k_len, padding_mask, attention_mask, use_causal_mask,
        query_offset,
    ):
        """Combines the masks into bool `(batch or 1, 1, q_len, k_len)`."""
        mask = None
        if padding_mask is not None:
            # (batch, k_len) --> (batch, 1, 1, k_len)
            mask = ops.cast(padding_mask, "bool")[:, None, None, :]
        if attention_mask is not None:
            # (batch, q_len, k_len) --> (batch, 1, q_len, k_len)
            explicit = ops.cast(attention_mask, "bool")[:, None, :, :]
            mask = explicit if mask is None else ops.logical_and(mask, explicit)
        if use_causal_mask:
            # Query i (absolute position query_offset + i) sees keys <= it.
            q_pos = ops.arange(q_len, dtype="int32")[:, None] + query_offset
            k_pos = ops.arange(k_len, dtype="int32")[None, :]
            causal = ops.greater_equal(q_pos, k_pos)[None, None, :, :]
            mask = causal if mask is None else ops.logical_and(mask, causal)
        if mask is None:
            return None
        # A row with no visible key would be NaN after the softmax: let it
        # see every key instead (uniform weights).
        empty_row = ops.logical_not(ops.any(mask, axis=-1, keepdims=True))
        return ops.logical_or(mask, empty_row)

    def _attend(self, q, k, v, mask, return_attention_scores, training,
                heads_first=False):
        """Scaled dot-product attention (equation 1).

        q: (batch, q_len, heads, d_k); k: (batch, k_len, heads, d_k);
        v: (batch, k_len, heads, d_v), or with `heads_first` (a cache)
        (batch, heads, k_len, d_k) and (batch, heads, k_len, d_v);
        mask: bool (batch|1, 1, q_len, k_len).
        Returns (batch, q_len, heads, d_v) and the weights or None.
        """
        scale = 1.0 / math.sqrt(self.key_dim)
        use_dropout = training and self.dropout > 0.0
        fusable = self.key_dim == self._value_dim  # the kernels need d_k == d_v
        kv = "bhkd" if heads_first else "bkhd"
        if fusable and not heads_first and not return_attention_scores and not use_dropout:
            # The fused kernel where the backend has one. cuDNN's (JAX on a
            # GPU) refuses a mask broadcast along the queries: give it all.
            if mask is not None:
                mask = ops.broadcast_to(
                    mask, (ops.shape(mask)[0], 1, ops.shape(q)[1], ops.shape(k)[1]))
            out = ops.dot_product_attention(q, k, v, mask=mask, scale=scale)
            return out, None
        # (batch, heads, q_len, k_len)
        scores = ops.einsum(f"bqhd,{kv}->bhqk", q, k) * ops.cast(scale, q.dtype)
        scores = ops.cast(scores, "float32")
        if mask is not None:
            scores = ops.where(mask, scores, MASK_VALUE)
        weights = ops.cast(ops.softmax(scores, axis=-1), q.dtype)
        dropped = self.dropout_layer(weights, training=training)
        out = ops.einsum(f"bhqk,{kv}->bqhd", dropped, v)
        return out, weights

    def call(
        self,
        query,
        value=None,
        key=None,
        padding_mask=None,
        attention_mask=None,
        use_causal_mask=False,
        return_attention_scores=False,
        cache=None,
        cache_index=None,
        training=None,
    ):
        value = query if value is None else value
        query_offset = 0
        if cache is not None and cache_index is None:
            q = self._split_heads(self.query_dense(query), self.key_dim)
            k, v = cache  # precomputed memory (cross-attention)
        elif cache is None and value is query and (key is None or key is query):
            q, k, v = self._project_qkv(query)  # self-attention: one matmul
        else:
            q = self._split_heads(self.query_dense(query), self.key_dim)
            # A decoding step projects a few rows: concatenating the kernels
            # would copy more than the products read, at every step on
            # PyTorch (docs/RESULTS.md).
            k, v = self._project_kv(value, key, fused=cache is None)
        if cache is not None and cache_index is not None:
            # Write the new keys/values at cache_index, in place.
            # (batch, heads, cache_len, head_dim)
            start = [0, 0, cache_index, 0]
            k = write_cache(cache[0], ops.cast(_heads_first(k), cache[0].dtype), start)
            v = write_cache(cache[1], ops.cast(_heads_first(v), cache[1].dtype), start)
            query_offset = cache_index
            # Only positions < cache_index + q_len hold real entries; the
            # causal mask with this offset hides the rest.
            use_causal_mask = True
        heads_first = cache is not None  # a cache is (batch, heads, len, dim)
        q_len, k_len = ops.shape(q)[1], ops.shape(k)[2 if heads_first else 1]
        mask = self._build_mask(
            q_len, k_len, padding_mask, attention_mask, use_causal_mask,
            query_offset,
        )
        out, weights = self._attend(
            q, k, v, mask, return_attention_scores, training, heads_first
        )
        # (batch, q_len, heads, d_v) --> (batch, q_len, heads * d_v)
        batch = ops.shape(out)[0]
        out = ops.reshape(out, (batch, q_len, self.num_heads * self._value_dim))
        out = self.output_dense(out)  # (batch, q_len, output_dim)
        results = (out,)
        if return_attention_scores:
            results += (weights,)
        if cache is not None:
            results += ((k, v),)
        return results[0] if len(results) == 1 else results

    def compute_output_shape(self, query_shape, value_shape=None, key_shape=None):
        return tuple(query_shape[:-1]) + (self.output_dim or query_shape[-1],)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "key_dim": self.key_dim,
                "value_dim": self.value_dim,
                "output_dim": self.output_dim,
                "dropout": self.dropout,
                "kernel_initializer": (
                    None if self.kernel_initializer is None
                    else keras.initializers.serialize(self.kernel_initializer)),
            }
        )
        return config
