"""EncoderBlock and DecoderBlock against NumPy compositions of the paper's
sub-layers, with the blocks' own (random) weights."""

import keras
import numpy as np
import pytest

from keras_transformer.layers import DecoderBlock, EncoderBlock
from tests.helpers import (
    assert_config_roundtrip,
    numpy_attention,
    numpy_layer_norm,
    to_numpy,
)

B, T, S, D = 2, 4, 6, 8


def ffn(layer, x):
    w1, b1 = to_numpy(layer.inner_dense.kernel), to_numpy(layer.inner_dense.bias)
    w2, b2 = to_numpy(layer.output_dense.kernel), to_numpy(layer.output_dense.bias)
    return np.maximum(0.0, x @ w1 + b1) @ w2 + b2


def norm(layer, x):
    return numpy_layer_norm(
        x, to_numpy(layer.gamma), to_numpy(layer.beta), layer.epsilon
    )


def residual(x, sublayer, norm_layer, norm_first):
    """The paper's post-norm or the pre-norm option, in NumPy."""
    if norm_first:
        return x + sublayer(norm(norm_layer, x))
    return norm(norm_layer, x + sublayer(x))


def randomize(layer):
    rng = np.random.default_rng(0)
    layer.set_weights([w + rng.normal(size=w.shape).astype("float32") * 0.2
                       for w in layer.get_weights()])


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_block_matches_numpy(norm_first):
    block = EncoderBlock(num_heads=2, key_dim=4, d_ff=16, norm_first=norm_first)
    block.build((B, S, D))
    randomize(block)
    x = np.random.default_rng(1).normal(size=(B, S, D)).astype("float32")
    padding = np.array([[1] * S, [1] * 3 + [0] * 3], bool)
    mask = np.broadcast_to(padding[:, None, :], (B, S, S))

    def attention(h):
        return numpy_attention(block.self_attention, h, h, mask)[0]

    expected = residual(x, attention, block.self_attention_norm, norm_first)
    expected = residual(
        expected, lambda h: ffn(block.feed_forward, h), block.feed_forward_norm,
        norm_first,
    )
    out = block(x, padding_mask=padding)
    np.testing.assert_allclose(to_numpy(out), expected, atol=1e-4)
    # Only some positions query (repeats and any order allowed): the same
    # rows, from the keys and values of every position.
    positions = np.array([[5, 0, 2], [1, 1, 4]], "int32")
    some, weights = block(x, padding_mask=padding, query_positions=positions,
                          return_attention_scores=True)
    rows = np.take_along_axis(expected, positions[:, :, None], axis=1)
    np.testing.assert_allclose(to_numpy(some), rows, atol=1e-4)
    assert tuple(weights.shape) == (B, 2, 3, S)
    with pytest.raises(ValueError, match="use_causal_mask=True"):
        block(x, use_causal_mask=True, query_positions=positions)


@pytest.mark.parametrize("norm_first", [False, True])
def test_causal_encoder_block_matches_numpy_and_its_cached_steps(norm_first):
    block = EncoderBlock(num_heads=2, key_dim=4, d_ff=16, norm_first=norm_first,
                         activation="gelu")
    block.build((B, S, D))
    randomize(block)
    x = np.random.default_rng(2).normal(size=(B, S, D)).astype("float32")
    causal = np.broadcast_to(np.tril(np.ones((S, S), bool)), (B, S, S))

    def attention(h):
        return numpy_attention(block.self_attention, h, h, causal)[0]

    expected = residual(x, attention, block.self_attention_norm, norm_first)
    expected = residual(  # the GELU network is checked in test_feed_forward
        expected, lambda h: to_numpy(block.feed_forward(h)), block.feed_forward_norm,
        norm_first,
    )
    full = to_numpy(block(x, use_causal_mask=True))
    np.testing.assert_allclose(full, expected, atol=1e-4)
    # The same block one position at a time with a cache.
    cache = (np.zeros((B, 2, S, 4), "float32"), np.zeros((B, 2, S, 4), "float32"))
    steps = []
    for t in range(S):
        out, cache = block(x[:, t:t + 1], self_attention_cache=cache, cache_index=t)
        steps.append(to_numpy(out))
    np.testing.assert_allclose(np.concatenate(steps, 1), full, atol=1e-5)
    assert np.abs(full - to_numpy(block(x))).max() > 1e-3  # causality matters


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_block_matches_numpy(norm_first):
    block = DecoderBlock(num_heads=2, key_dim=4, d_ff=16, norm_first=norm_first)
    block.build((B, T, D), (B, S, D))
    randomize(block)
    rng = np.random.default_rng(1)
    y = rng.normal(size=(B, T, D)).astype("float32")
    memory = rng.normal(size=(B, S, D)).astype("float32")
    enc_padding = np.array([[1] * S, [1] * 2 + [0] * 4], bool)
    causal = np.broadcast_to(np.tril(np.ones((T, T), bool)), (B, T, T))
    cross_mask = np.broadcast_to(enc_padding[:, None, :], (B, T, S))

    expected = residual(
        y, lambda h: numpy_attention(block.self_attention, h, h, causal)[0],
        block.self_attention_norm, norm_first,
    )
    expected = residual(
        expected,
        lambda h: numpy_attention(block.cross_attention, h, memory, cross_mask)[0],
        block.cross_attention_norm, norm_first,
    )
    expected = residual(
        expected, lambda h: ffn(block.feed_forward, h), block.feed_forward_norm,
        norm_first,
    )
    out = block(y, memory, encoder_padding_mask=enc_padding)
    np.testing.assert_allclose(to_numpy(out), expected, atol=1e-4)


def test_decoder_block_attention_scores_and_cached_steps():
    block = DecoderBlock(num_heads=2, key_dim=4, d_ff=16, dropout_rate=0.0)
    rng = np.random.default_rng(3)
    y = rng.normal(size=(B, T, D)).astype("float32")
    memory = rng.normal(size=(B, S, D)).astype("float32")
    full, (self_w, cross_w) = block(y, memory, return_attention_scores=True)
    assert tuple(self_w.shape) == (B, 2, T, T)
    assert tuple(cross_w.shape) == (B, 2, T, S)
    # Causal: no weight above the diagonal.
    assert np.all(np.triu(to_numpy(self_w), k=1) == 0.0)

    cache = (keras.ops.zeros((B, 2, T, 4)), keras.ops.zeros((B, 2, T, 4)))
    cross = block.cross_attention.compute_cache(memory)
    steps = []
    for i in range(T):
        out, cache = block(
            y[:, i:i + 1], self_attention_cache=cache,
            cross_attention_cache=cross, cache_index=i,
        )
        steps.append(to_numpy(out))
    np.testing.assert_allclose(np.concatenate(steps, 1), to_numpy(full), atol=1e-5)


def test_dropout_is_active_only_in_training():
    block = EncoderBlock(num_heads=2, key_dim=4, d_ff=16, dropout_rate=0.5)
    x = np.random.default_rng(0).normal(size=(B, S, D)).astype("float32")
    a, b = to_numpy(block(x)), to_numpy(block(x))
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(to_numpy(block(x, training=True)), a)


@pytest.mark.parametrize("cls", [EncoderBlock, DecoderBlock])
def test_config_roundtrip_and_bad_arguments(cls):
    clone = assert_config_roundtrip(
        cls(num_heads=2, key_dim=4, value_dim=3, d_ff=16, norm_first=True)
    )
    assert clone.norm_first and clone.value_dim == 3
    with pytest.raises(ValueError, match="dropout_rate=1.5"):
        cls(num_heads=2, key_dim=4, d_ff=16, dropout_rate=1.5)
    with pytest.raises(ValueError, match="d_ff=-3"):
        cls(num_heads=2, key_dim=4, d_ff=-3)
