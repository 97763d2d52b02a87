import numpy as np
import pytest

from keras_transformer.layers import FeedForward
from tests.helpers import assert_config_roundtrip, to_numpy


def test_matches_numpy_relu_network():
    layer = FeedForward(d_ff=12)
    x = np.random.default_rng(0).normal(size=(2, 3, 5)).astype("float32")
    out = to_numpy(layer(x))
    w1, b1, w2, b2 = [to_numpy(w) for w in layer.weights]
    expected = np.maximum(0.0, x @ w1 + b1) @ w2 + b2
    np.testing.assert_allclose(out, expected, atol=1e-5)


def test_gated_form_is_swiglu_with_the_kernels_of_three_halves_the_width():
    layer = FeedForward(d_ff=8, activation="silu", gated=True)
    x = np.random.default_rng(2).normal(size=(2, 3, 12)).astype("float32")
    layer.build(x.shape)
    w1, b1, v, c, w2, b2 = [to_numpy(w) for w in layer.weights]
    assert v.shape == w1.shape == (12, 8) and w2.shape == (8, 12)

    def silu(h):
        return h / (1 + np.exp(-h))

    expected = (silu(x @ w1 + b1) * (x @ v + c)) @ w2 + b2
    np.testing.assert_allclose(to_numpy(layer(x)), expected, atol=1e-5)
    # d_ff 8 gated has the kernels' weights of d_ff 12 ungated: 3 x 12 x 8
    ungated = FeedForward(d_ff=12)
    ungated.build(x.shape)
    assert sum(w.size for w in (w1, v, w2)) == sum(
        np.prod(w.shape) for w in ungated.weights if len(w.shape) == 2) == 288
    assert_config_roundtrip(layer)


def test_config_roundtrip_and_bad_d_ff():
    assert_config_roundtrip(FeedForward(d_ff=8, activation="gelu"))
    with pytest.raises(ValueError, match="d_ff=0"):
        FeedForward(d_ff=0)


def test_gelu_exact_and_tanh_forms_match_numpy():
    from math import erf

    from keras_transformer.layers import gelu_approximate

    def exact(h):
        return 0.5 * h * (1 + np.vectorize(erf)(h / np.sqrt(2)))

    def tanh_form(h):
        return 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h**3)))

    x = np.random.default_rng(1).normal(size=(2, 3, 5)).astype("float32")
    for activation, gelu in [("gelu", exact), (gelu_approximate, tanh_form)]:
        layer = FeedForward(d_ff=12, activation=activation)
        layer.build(x.shape)
        w1, b1, w2, b2 = [to_numpy(w) for w in layer.weights]
        np.testing.assert_allclose(
            to_numpy(layer(x)), gelu(x @ w1 + b1) @ w2 + b2, atol=1e-5
        )
    assert np.abs(exact(3 * x) - tanh_form(3 * x)).max() > 1e-4  # they differ
    assert_config_roundtrip(FeedForward(d_ff=8, activation=gelu_approximate))
