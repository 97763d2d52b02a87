import math

import numpy as np

from keras_transformer.layers import TokenEmbedding
from tests.helpers import assert_config_roundtrip, to_numpy


def test_scaled_lookup_and_tied_reverse_projection():
    layer = TokenEmbedding(vocabulary_size=11, d_model=4)
    ids = np.array([[3, 0, 10]], "int32")
    embedded = to_numpy(layer(ids))
    table = to_numpy(layer.embeddings)
    np.testing.assert_allclose(embedded[0], table[[3, 0, 10]] * math.sqrt(4), atol=1e-6)
    hidden = np.random.default_rng(0).normal(size=(1, 2, 4)).astype("float32")
    np.testing.assert_allclose(to_numpy(layer(hidden, reverse=True)), hidden @ table.T, atol=1e-5)


def test_default_initializer_gives_unit_variance_after_scaling():
    layer = TokenEmbedding(vocabulary_size=4000, d_model=64)
    layer.build()
    scaled = to_numpy(layer.embeddings) * math.sqrt(64)
    assert abs(scaled.std() - 1.0) < 0.02


def test_config_roundtrip():
    clone = assert_config_roundtrip(TokenEmbedding(vocabulary_size=7, d_model=3))
    assert clone.vocabulary_size == 7


def test_unscaled_lookup():
    layer = TokenEmbedding(vocabulary_size=10, d_model=4, scale=False)
    ids = np.array([[3, 0, 9]])
    np.testing.assert_allclose(
        to_numpy(layer(ids)), to_numpy(layer.embeddings)[ids], atol=1e-6
    )
    assert_config_roundtrip(layer)
