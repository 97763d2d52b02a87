"""The decoder-only language model: its size in closed form, causality,
and the same outputs as keras-hub's GPT-2 with the same weights."""

import keras
import numpy as np
import pytest

from keras_transformer import CausalLM
from keras_transformer.models import CAUSAL_LM_PRESETS
from tests.helpers import to_numpy
from tests.models.keras_hub_weights import copy_block, copy_norm, randomize


def closed_form_params(c):
    """Tied embeddings, learned positions, biased projections, two
    LayerNorms a block, and one on top when pre-norm."""
    d, dff, n, v = c["d_model"], c["d_ff"], c["num_layers"], c["vocabulary_size"]
    attention = 4 * (d * d + d)
    feed_forward = d * dff + dff + dff * d + d + (d * dff + dff if c.get("gated") else 0)
    block = attention + feed_forward + 4 * d
    final_norm = 2 * d if c.get("norm_first") else 0
    return v * d + c["max_length"] * d + n * block + final_norm


def test_gpt1_has_116534784_weights():
    model = CausalLM.from_preset("gpt1")
    assert model.count_params() == 116_534_784
    assert model.count_params() == closed_form_params(CAUSAL_LM_PRESETS["gpt1"]["config"])


@pytest.mark.parametrize("name", ["gpt_tiny", "gpt_mini", "gpt2"])
def test_presets_match_the_closed_form(name):
    model = CausalLM.from_preset(name)
    assert model.count_params() == closed_form_params(CAUSAL_LM_PRESETS[name]["config"])


def test_gated_feed_forward_is_counted_and_saved(tmp_path):
    config = dict(CAUSAL_LM_PRESETS["gpt_tiny"]["config"], vocabulary_size=40,
                  activation="silu", gated=True)
    model = CausalLM(**config)
    assert model.count_params() == closed_form_params(config)
    ids = {"token_ids": np.array([[1, 5, 9, 13]], "int32")}
    model.save(tmp_path / "lm.keras")
    loaded = keras.saving.load_model(tmp_path / "lm.keras")
    assert loaded.gated and loaded.blocks[0].feed_forward.gated
    np.testing.assert_allclose(to_numpy(loaded(ids)), to_numpy(model(ids)), atol=1e-6)


def test_gpt2_small_has_124439808_weights():
    # GPT-2 small's published size ("124M") with its 50,257-token vocabulary.
    assert CausalLM.from_preset("gpt2").count_params() == 124_439_808


@pytest.mark.parametrize("norm_first", [False, True])
def test_a_future_token_changes_no_earlier_logit(norm_first):
    model = CausalLM.from_preset("gpt_tiny", vocabulary_size=40, norm_first=norm_first)
    randomize(model)
    ids = np.array([[1, 5, 9, 13, 7, 22, 3, 8]], "int32")
    base = to_numpy(model({"token_ids": ids}))
    for t in range(1, ids.shape[1]):
        changed = ids.copy()
        changed[0, t] = 30
        logits = to_numpy(model({"token_ids": changed}))
        np.testing.assert_allclose(logits[:, :t], base[:, :t], atol=1e-5)
        assert np.abs(logits[:, t:] - base[:, t:]).max() > 1e-3


def test_padding_changes_no_real_logit():
    model = CausalLM.from_preset("gpt_tiny", vocabulary_size=40)
    randomize(model)
    short = to_numpy(model({"token_ids": np.array([[1, 5, 9]], "int32")}))
    padded = to_numpy(model({"token_ids": np.array([[1, 5, 9, 0, 0]], "int32")}))
    np.testing.assert_allclose(padded[:, :3], short, atol=1e-5)


def _keras_hub_gpt2(vocabulary_size=40, num_layers=2, d_model=32, num_heads=4,
                    d_ff=64, max_length=16):
    import keras_hub

    theirs = keras_hub.models.GPT2Backbone(
        vocabulary_size=vocabulary_size, num_layers=num_layers, num_heads=num_heads,
        hidden_dim=d_model, intermediate_dim=d_ff, max_sequence_length=max_length,
    )
    ours = CausalLM.from_preset(
        "gpt2", vocabulary_size=vocabulary_size, num_layers=num_layers,
        d_model=d_model, num_heads=num_heads, d_ff=d_ff, max_length=max_length,
    )
    randomize(theirs)
    ours.token_embedding.embeddings.assign(to_numpy(theirs.token_embedding.embeddings))
    ours.positions.position_embeddings.assign(
        to_numpy(theirs.position_embedding.position_embeddings)
    )
    for their_block, our_block in zip(theirs.transformer_layers, ours.blocks):
        copy_block(their_block, our_block)
    copy_norm(theirs.layer_norm, ours.final_norm)
    return theirs, ours


def test_same_states_and_logits_as_keras_hub_gpt2_with_its_weights():
    theirs, ours = _keras_hub_gpt2()
    ids = np.array([[1, 5, 9, 13, 7, 22, 0, 0], [1, 4, 8, 15, 16, 23, 42 % 40, 6]], "int32")
    expected = to_numpy(theirs({"token_ids": ids, "padding_mask": (ids != 0).astype("int32")}))
    got = to_numpy(ours.hidden_states(keras.ops.convert_to_tensor(ids)))
    real = ids != 0
    np.testing.assert_allclose(got[real], expected[real], atol=1e-5)
    np.testing.assert_allclose(
        to_numpy(ours({"token_ids": ids}))[real],
        (expected @ to_numpy(theirs.token_embedding.embeddings).T)[real], atol=1e-5,
    )
