import math

import keras
import numpy as np
import pytest

from keras_transformer import Transformer
from keras_transformer.layers import PositionalEncoding
from tests.helpers import assert_config_roundtrip, to_numpy


def test_hard_coded_values_interleave_sin_and_cos():
    pe = to_numpy(PositionalEncoding(max_length=16)(keras.ops.zeros((1, 3, 4))))[0]
    # pos 0: sin 0, cos 0, sin 0, cos 0
    np.testing.assert_allclose(pe[0], [0.0, 1.0, 0.0, 1.0], atol=1e-7)
    # pos 1, dims 0/1: sin(1), cos(1); dims 2/3: 1 / 10000^(2/4) = 0.01
    np.testing.assert_allclose(
        pe[1], [0.84147098, 0.54030231, 0.00999983, 0.99995], atol=1e-6
    )
    # pos 2
    np.testing.assert_allclose(
        pe[2], [0.90929743, -0.41614684, 0.01999867, 0.99980001], atol=1e-6
    )


def test_matches_the_paper_formula_at_d_model_512():
    d_model, length = 512, 50
    pe = to_numpy(PositionalEncoding(max_length=64)(keras.ops.zeros((1, length, d_model))))[0]
    pos = np.arange(length)[:, None]
    i = np.arange(d_model // 2)[None, :]
    angle = pos / np.power(10000.0, 2 * i / d_model)
    np.testing.assert_allclose(pe[:, 0::2], np.sin(angle), atol=2e-4)
    np.testing.assert_allclose(pe[:, 1::2], np.cos(angle), atol=2e-4)


def test_adds_to_inputs_and_offsets_start_index():
    layer = PositionalEncoding(max_length=16)
    x = np.random.default_rng(0).normal(size=(2, 6, 8)).astype("float32")
    full = to_numpy(layer(x))
    np.testing.assert_allclose(full - x, np.broadcast_to(full[0] - x[0], x.shape), atol=1e-6)
    tail = to_numpy(layer(x[:, 4:], start_index=4))
    np.testing.assert_allclose(tail, full[:, 4:], atol=1e-6)


def test_sinusoid_extends_past_max_length():
    out = PositionalEncoding(max_length=4)(keras.ops.zeros((1, 10, 6)))
    assert tuple(out.shape) == (1, 10, 6)
    assert math.isclose(float(to_numpy(out)[0, 9, 0]), math.sin(9.0), abs_tol=1e-5)


def test_learned_table_and_its_limit():
    layer = PositionalEncoding(max_length=4, learned=True)
    x = keras.ops.zeros((2, 3, 6))
    out = to_numpy(layer(x))
    table = to_numpy(layer.position_embeddings)
    np.testing.assert_allclose(out[1], table[:3], atol=1e-7)
    with pytest.raises(ValueError, match="max_length=4.*length 5"):
        layer(keras.ops.zeros((2, 5, 6)))


def test_learned_table_starts_at_its_initializer_scale():
    # GPT and BERT's default, and the sinusoid's scale the Transformer asks for.
    default = PositionalEncoding(max_length=512, learned=True)
    default.build((None, 512, 64))
    assert abs(to_numpy(default.position_embeddings).std() - 0.02) < 0.001
    model = Transformer.from_preset("tiny", vocabulary_size=50, learned_positions=True)
    table = to_numpy(model.get_layer("encoder_positional_encoding").position_embeddings)
    sinusoid = to_numpy(default.sinusoid(keras.ops.arange(256), 64))
    rms = float(np.sqrt(np.mean(sinusoid**2)))
    assert abs(rms - 0.5**0.5) < 1e-3
    assert abs(table.std() - rms) < 0.02


def test_config_roundtrip_and_bad_arguments():
    clone = assert_config_roundtrip(PositionalEncoding(
        max_length=9, learned=True,
        embeddings_initializer=keras.initializers.RandomNormal(stddev=0.5)))
    assert clone.embeddings_initializer.stddev == 0.5
    with pytest.raises(ValueError, match="max_length=0"):
        PositionalEncoding(max_length=0)
