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
