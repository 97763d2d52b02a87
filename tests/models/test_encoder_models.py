"""The encoder-only models: sizes in closed form, and the same outputs as
keras-hub's BERT with the same weights."""

import numpy as np
import pytest

from keras_transformer import BidirectionalEncoder, MaskedLM, SequenceClassifier
from keras_transformer.layers import gelu_approximate
from keras_transformer.models import ENCODER_PRESETS
from tests.helpers import to_numpy
from tests.models.keras_hub_weights import copy_block, copy_dense, copy_norm, randomize


def closed_form_params(c):
    """Token, position and segment tables, an embedding LayerNorm, the
    blocks, and the tanh pooler."""
    d, dff, n, v = c["d_model"], c["d_ff"], c["num_layers"], c["vocabulary_size"]
    block = 4 * (d * d + d) + (d * dff + dff + dff * d + d) + 4 * d
    if c.get("gated"):  # the feed-forward network's V and c
        block += d * dff + dff
    embeddings = v * d + c["max_length"] * d + c["num_segments"] * d + 2 * d
    return embeddings + n * block + d * d + d


@pytest.mark.parametrize("name, expected", [
    ("bert_base", 109_482_240), ("bert_large", 335_141_888),
])
def test_bert_sizes(name, expected):
    model = BidirectionalEncoder.from_preset(name)
    assert model.count_params() == expected
    assert model.count_params() == closed_form_params(ENCODER_PRESETS[name]["config"])


def test_cpu_presets_match_the_closed_form():
    for name in ["bert_tiny", "bert_mini"]:
        model = BidirectionalEncoder.from_preset(name)
        assert model.count_params() == closed_form_params(ENCODER_PRESETS[name]["config"])


def test_gated_feed_forward_is_counted():
    config = dict(ENCODER_PRESETS["bert_tiny"]["config"], activation="silu", gated=True)
    model = BidirectionalEncoder(**config)
    assert model.count_params() == closed_form_params(config)
    assert all(block.feed_forward.gated for block in model.blocks)


def test_masked_lm_adds_the_heads_dense_norm_and_bias():
    mlm = MaskedLM.from_preset("bert_tiny")
    d, v = 128, 8000
    assert mlm.count_params() == mlm.encoder.count_params() + d * d + d + 2 * d + v


SIZES = dict(vocabulary_size=40, num_layers=2, d_model=32, num_heads=4, d_ff=64,
             max_length=16)
IDS = np.array([[1, 5, 9, 13, 2, 22, 7, 2], [1, 4, 8, 2, 0, 0, 0, 0]], "int32")
SEGMENTS = np.array([[0, 0, 0, 0, 0, 1, 1, 1], [0, 0, 0, 0, 0, 0, 0, 0]], "int32")


def keras_hub_bert():
    """keras-hub's `BertBackbone` with random weights, and ours with them."""
    import keras_hub

    theirs = keras_hub.models.BertBackbone(
        vocabulary_size=SIZES["vocabulary_size"], num_layers=SIZES["num_layers"],
        num_heads=SIZES["num_heads"], hidden_dim=SIZES["d_model"],
        intermediate_dim=SIZES["d_ff"], max_sequence_length=SIZES["max_length"],
    )
    # keras-hub's BERT computes GELU by its tanh form, as BERT's release did.
    ours = BidirectionalEncoder.from_preset("bert_tiny", **SIZES,
                                            activation=gelu_approximate)
    randomize(theirs)
    for their, our in [(theirs.token_embedding, ours.token_embedding),
                       (theirs.segment_embedding, ours.segment_embedding)]:
        our.embeddings.assign(to_numpy(their.embeddings))
    ours.positions.position_embeddings.assign(
        to_numpy(theirs.position_embedding.position_embeddings)
    )
    copy_norm(theirs.embeddings_layer_norm, ours.embedding_norm)
    for their_block, our_block in zip(theirs.transformer_layers, ours.blocks):
        copy_block(their_block, our_block)
    copy_dense(theirs.pooled_dense, ours.pooler)
    return theirs, ours


def test_same_outputs_as_keras_hub_bert_with_its_weights():
    theirs, ours = keras_hub_bert()
    expected = theirs({"token_ids": IDS, "segment_ids": SEGMENTS,
                       "padding_mask": (IDS != 0).astype("int32")})
    got = ours({"token_ids": IDS, "segment_ids": SEGMENTS})
    real = IDS != 0
    np.testing.assert_allclose(to_numpy(got["sequence_output"])[real],
                               to_numpy(expected["sequence_output"])[real], atol=1e-5)
    np.testing.assert_allclose(to_numpy(got["pooled_output"]),
                               to_numpy(expected["pooled_output"]), atol=1e-5)


def test_same_masked_lm_logits_as_keras_hub_head():
    from keras_hub.layers import MaskedLMHead as TheirHead

    theirs, ours = keras_hub_bert()
    mlm = MaskedLM(ours)
    positions = np.array([[1, 3, 6], [2, 1, 0]], "int32")
    head = TheirHead(vocabulary_size=SIZES["vocabulary_size"],
                     token_embedding=theirs.token_embedding,
                     intermediate_activation=gelu_approximate, layer_norm_epsilon=1e-12)
    inputs = {"token_ids": IDS, "segment_ids": SEGMENTS,
              "padding_mask": (IDS != 0).astype("int32")}
    head(theirs(inputs)["sequence_output"], mask_positions=positions)
    randomize(head, seed=1)  # the shared token embedding too
    sequence = theirs(inputs)["sequence_output"]
    copy_dense(head._intermediate_dense, mlm.head.dense)
    copy_norm(head._intermediate_layer_norm, mlm.head.norm)
    mlm.head.output_bias.assign(to_numpy(head._bias))
    mlm.encoder.token_embedding.embeddings.assign(to_numpy(theirs.token_embedding.embeddings))
    expected = to_numpy(head(sequence, mask_positions=positions))
    np.testing.assert_allclose(
        to_numpy(mlm({"token_ids": IDS, "segment_ids": SEGMENTS,
                      "mask_positions": positions})), expected, atol=1e-5,
    )
    # The head alone, given the whole sequence, gathers the same positions.
    np.testing.assert_allclose(to_numpy(mlm.head(sequence, positions)), expected, atol=1e-5)


def test_segments_and_padding():
    _, encoder = keras_hub_bert()
    pooled = lambda ids, seg: to_numpy(encoder({"token_ids": ids, "segment_ids": seg})["pooled_output"])
    base = pooled(IDS, SEGMENTS)
    assert np.abs(pooled(IDS, 0 * SEGMENTS)[0] - base[0]).max() > 1e-3
    longer = np.pad(IDS, ((0, 0), (0, 3)))  # more padding changes nothing
    np.testing.assert_allclose(pooled(longer, np.pad(SEGMENTS, ((0, 0), (0, 3)))), base,
                               atol=1e-5)


def test_classifier_reads_the_shared_encoder():
    mlm = MaskedLM.from_preset("bert_tiny", vocabulary_size=40)
    classifier = SequenceClassifier(mlm.encoder, num_classes=3)
    logits = to_numpy(classifier({"token_ids": IDS, "segment_ids": SEGMENTS}))
    assert logits.shape == (2, 3)
    pooled = to_numpy(mlm.encoder({"token_ids": IDS, "segment_ids": SEGMENTS})["pooled_output"])
    dense = classifier.output_dense
    np.testing.assert_allclose(
        logits, pooled @ to_numpy(dense.kernel) + to_numpy(dense.bias), atol=1e-5
    )
    assert classifier.encoder is mlm.encoder
    with pytest.raises(ValueError, match="num_classes"):
        SequenceClassifier(mlm.encoder, num_classes=0)
