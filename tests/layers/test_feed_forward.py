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
