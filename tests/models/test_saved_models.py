"""`.keras` files saved by an earlier version load and compute the same
numbers (see tests/fixtures/README.md)."""

import os

import keras
import numpy as np
import pytest

from keras_transformer.decoding import beam_search

FIXTURES = os.path.join(os.path.dirname(__file__), os.pardir, "fixtures")


@pytest.fixture(scope="module")
def expected():
    return dict(np.load(os.path.join(FIXTURES, "transformer_logits.npz")))


@pytest.mark.parametrize("name", ["post_norm", "pre_norm"])
def test_saved_model_gives_the_same_logits_and_translations(name, expected):
    model = keras.saving.load_model(os.path.join(FIXTURES, f"transformer_{name}.keras"))
    inputs = {k: expected[k] for k in ("encoder_token_ids", "decoder_token_ids")}
    logits = keras.ops.convert_to_numpy(model(inputs))
    np.testing.assert_allclose(logits, expected[f"{name}_logits"], atol=1e-5)
    tokens, scores = beam_search(
        model, expected["encoder_token_ids"], beam_size=3, alpha=0.6, max_extra_length=4
    )
    np.testing.assert_array_equal(tokens, expected[f"{name}_beam_tokens"])
    np.testing.assert_allclose(scores, expected[f"{name}_beam_scores"], atol=1e-5)


@pytest.mark.parametrize("name, inputs", [
    ("masked_lm", ("token_ids", "segment_ids", "mask_positions")),
    ("sequence_classifier", ("token_ids", "segment_ids")),
])
def test_saved_encoder_models_give_the_same_logits(name, inputs):
    expected = np.load(os.path.join(FIXTURES, "encoder_logits.npz"))
    model = keras.saving.load_model(os.path.join(FIXTURES, f"{name}.keras"))
    logits = keras.ops.convert_to_numpy(model({k: expected[k] for k in inputs}))
    np.testing.assert_allclose(logits, expected[f"{name}_logits"], atol=1e-5)
