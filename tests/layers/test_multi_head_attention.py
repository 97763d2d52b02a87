import math

import keras
import numpy as np
import pytest

from keras_transformer.layers import MultiHeadAttention
from keras_transformer.models import PRESETS
from tests.helpers import assert_config_roundtrip, numpy_attention, to_numpy

B, T, S, D = 2, 5, 7, 16


def make_layer(**kwargs):
    layer = MultiHeadAttention(num_heads=4, key_dim=4, **kwargs)
    layer.build((B, T, D), (B, S, D))
    # Hand-set weights: every kernel and bias drawn from a known seed.
    rng = np.random.default_rng(0)
    layer.set_weights([rng.normal(size=w.shape).astype("float32") * 0.3
                       for w in layer.get_weights()])
    return layer


def inputs():
    rng = np.random.default_rng(1)
    return (rng.normal(size=(B, T, D)).astype("float32"),
            rng.normal(size=(B, S, D)).astype("float32"))


@pytest.mark.parametrize("return_scores", [False, True])
def test_matches_numpy_with_padding_and_explicit_mask(return_scores):
    layer = make_layer()
    query, value = inputs()
    padding = np.array([[1] * S, [1] * 4 + [0] * 3], bool)  # (B, S)
    explicit = np.random.default_rng(2).random((B, T, S)) > 0.3
    explicit[:, :, 0] = True  # keep every row non-empty
    expected, expected_weights = numpy_attention(
        layer, query, value, padding[:, None, :] & explicit
    )
    out = layer(query, value, padding_mask=padding, attention_mask=explicit,
                return_attention_scores=return_scores)
    if return_scores:
        out, weights = out
        np.testing.assert_allclose(to_numpy(weights), expected_weights, atol=1e-5)
    np.testing.assert_allclose(to_numpy(out), expected, atol=1e-4)


def test_causal_mask_matches_numpy():
    layer = make_layer()
    query, _ = inputs()
    causal = np.tril(np.ones((T, T), bool))[None].repeat(B, 0)
    expected, _ = numpy_attention(layer, query, query, causal)
    out = layer(query, use_causal_mask=True)
    np.testing.assert_allclose(to_numpy(out), expected, atol=1e-5)


def test_value_dim_and_output_dim():
    layer = MultiHeadAttention(num_heads=2, key_dim=3, value_dim=5, output_dim=6)
    query, value = inputs()
    out = layer(query, value)
    assert tuple(out.shape) == (B, T, 6)
    assert tuple(layer.value_dense.kernel.shape) == (D, 10)
    expected, _ = numpy_attention(layer, query, value, None)
    np.testing.assert_allclose(to_numpy(out), expected, atol=1e-5)


def test_fused_projections_equal_separate_ones():
    # value is query: Q, K, V from one concatenated kernel; key omitted:
    # K and V from one (cross-attention); a copy of the value as key takes
    # the separate projections. d_v != d_k, so the split points matter.
    layer = MultiHeadAttention(num_heads=2, key_dim=3, value_dim=5)
    query, value = inputs()
    fused = to_numpy(layer(query))  # builds the layer
    expected_self, _ = numpy_attention(layer, query, query, None)
    np.testing.assert_allclose(fused, expected_self, atol=1e-5)
    expected_cross, _ = numpy_attention(layer, query, value, None)
    np.testing.assert_allclose(to_numpy(layer(query, value)), expected_cross, atol=1e-5)
    separate = layer(query, value, key=value.copy())
    np.testing.assert_allclose(to_numpy(separate), expected_cross, atol=1e-5)
    # A key other than the value is projected by W^K alone.
    key = np.flip(value, axis=1).copy()
    expected_key, _ = numpy_attention(layer, query, value, None, key=key)
    np.testing.assert_allclose(to_numpy(layer(query, value, key=key)), expected_key,
                               atol=1e-5)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("return_scores", [False, True])
def test_fully_masked_row_is_finite(dtype, return_scores):
    layer = MultiHeadAttention(num_heads=2, key_dim=4, dtype=dtype)
    query, value = inputs()
    padding = np.array([[0] * S, [1] * S], bool)  # first sequence all padding
    out = layer(keras.ops.cast(query, dtype), keras.ops.cast(value, dtype),
                padding_mask=padding, return_attention_scores=return_scores)
    out = out[0] if return_scores else out
    values = to_numpy(keras.ops.cast(out, "float32"))
    assert np.all(np.isfinite(values))


def test_incremental_cache_equals_full_causal_pass():
    layer = make_layer()
    query, _ = inputs()
    full = to_numpy(layer(query, use_causal_mask=True))
    cache = (keras.ops.zeros((B, 4, T, 4)), keras.ops.zeros((B, 4, T, 4)))
    steps = []
    for i in range(T):
        out, cache = layer(query[:, i:i + 1], cache=cache, cache_index=i)
        steps.append(to_numpy(out))
    np.testing.assert_allclose(np.concatenate(steps, 1), full, atol=1e-5)


def test_precomputed_cache_equals_cross_attention():
    layer = make_layer()
    query, value = inputs()
    padding = np.array([[1] * S, [1] * 3 + [0] * 4], bool)
    expected = to_numpy(layer(query, value, padding_mask=padding))
    memory = layer.compute_cache(value)
    out, _ = layer(query, cache=memory, padding_mask=padding)
    np.testing.assert_allclose(to_numpy(out), expected, atol=1e-5)


def test_config_roundtrip():
    layer = MultiHeadAttention(num_heads=3, key_dim=7, value_dim=5, dropout=0.1)
    clone = assert_config_roundtrip(layer)
    assert clone.num_heads == 3 and clone.value_dim == 5
    clone = assert_config_roundtrip(MultiHeadAttention(2, 4, kernel_initializer="zeros"))
    clone.build((B, T, D))
    assert not np.any(to_numpy(clone.query_dense.kernel))


def test_default_kernels_are_glorot_with_fans_counted_per_head():
    # At mini's size: Glorot uniform over (d, h, d_k) with the leading axis
    # a receptive field has fans d * h and d * d_k; over (h, d_k, d):
    # h * d_k and h * d. Uniform(-a, a) has std a / sqrt(3).
    config = PRESETS["mini"]["config"]
    d, h, d_k = config["d_model"], config["num_heads"], config["key_dim"]
    layer = MultiHeadAttention(num_heads=h, key_dim=d_k)
    layer.build((None, 50, d))
    projection = math.sqrt(6 / (d * h + d * d_k))
    limits = {"query": projection, "key": projection, "value": projection,
              "attention_output": math.sqrt(6 / (h * d_k + h * d))}
    for dense in (layer.query_dense, layer.key_dense, layer.value_dense, layer.output_dense):
        kernel, limit = to_numpy(dense.kernel), limits[dense.name]
        assert np.abs(kernel).max() <= limit
        assert abs(kernel.std() - limit / math.sqrt(3)) < 0.03 * limit
    plain = MultiHeadAttention(num_heads=h, key_dim=d_k, kernel_initializer="glorot_uniform")
    plain.build((None, 50, d))
    assert abs(to_numpy(plain.query_dense.kernel).std() - math.sqrt(2 / (d + h * d_k))) < 0.003


@pytest.mark.parametrize("kwargs, message", [
    (dict(num_heads=0, key_dim=4), "num_heads=0"),
    (dict(num_heads=2, key_dim=-1), "key_dim=-1"),
    (dict(num_heads=2, key_dim=4, dropout=1.0), "dropout=1.0"),
])
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        MultiHeadAttention(**kwargs)
