import keras
import numpy as np
import pytest

from keras_transformer import PRESETS, Transformer
from tests.helpers import to_numpy


def closed_form_params(c, vocabulary_size=None):
    """The closed form of docs/paper.md: biases on all projections, two-parameter
    LayerNorm, tied shared embedding, no pre-softmax bias."""
    d, h, dff, n = c["d_model"], c["num_heads"], c["d_ff"], c["num_layers"]
    dk, dv = c["key_dim"], c["value_dim"]
    v = vocabulary_size or c["vocabulary_size"]
    attention = 2 * (d * h * dk + h * dk) + (d * h * dv + h * dv) + (h * dv * d + d)
    feed_forward = d * dff + dff + dff * d + d
    if c.get("gated"):  # V and c
        feed_forward += d * dff + dff
    encoder = attention + feed_forward + 4 * d
    decoder = 2 * attention + feed_forward + 6 * d
    learned_positions = 2 * c["max_length"] * d if c.get("learned_positions") else 0
    decoder_layers = c.get("num_decoder_layers") or n
    return n * encoder + decoder_layers * decoder + v * d + learned_positions


def tiny(**overrides):
    return Transformer.from_preset("tiny", **{"vocabulary_size": 50, **overrides})


def batch(enc, dec):
    return {"encoder_token_ids": np.array(enc, "int32"),
            "decoder_token_ids": np.array(dec, "int32")}


def test_base_has_exactly_63082496_parameters():
    model = Transformer.from_preset("base")
    assert model.count_params() == 63_082_496
    assert model.count_params() == closed_form_params(PRESETS["base"]["config"])


@pytest.mark.parametrize("name", list(PRESETS))
def test_every_preset_matches_the_closed_form(name):
    # A small vocabulary keeps the test fast; the vocabulary term is V * d.
    model = Transformer.from_preset(name, vocabulary_size=100)
    assert model.count_params() == closed_form_params(PRESETS[name]["config"], 100)


@pytest.mark.parametrize("name", [n for n, p in PRESETS.items()
                                  if p["paper"] and p["paper"]["params_millions"]])
def test_presets_reproduce_table3_parameter_counts(name):
    # Table 3's rounded counts fit a tied vocabulary of ~41000 rows (big:
    # ~36000), see docs/paper.md.
    vocabulary = 36000 if name == "big" else 41000
    count = closed_form_params(PRESETS[name]["config"], vocabulary)
    assert round(count / 1e6) == PRESETS[name]["paper"]["params_millions"]


def test_logits_shape_and_entry_points_agree():
    model = tiny()
    inputs = batch([[5, 6, 7, 0], [3, 4, 0, 0]], [[1, 8, 9], [1, 2, 0]])
    logits = to_numpy(model(inputs))
    assert logits.shape == (2, 3, 50) and logits.dtype == np.float32
    encoded, mask = model.encode(inputs["encoder_token_ids"])
    decoded = model.decode(inputs["decoder_token_ids"], encoded, mask)
    np.testing.assert_allclose(to_numpy(decoded), logits, atol=1e-5)


def test_future_decoder_tokens_change_no_earlier_output():
    model = tiny()
    a = batch([[5, 6, 7, 8]], [[1, 9, 10, 11, 12]])
    b = batch([[5, 6, 7, 8]], [[1, 9, 10, 40, 41]])  # positions 3, 4 differ
    la, lb = to_numpy(model(a)), to_numpy(model(b))
    np.testing.assert_allclose(la[:, :3], lb[:, :3], atol=1e-5)
    assert not np.allclose(la[:, 3:], lb[:, 3:], atol=1e-3)


def test_padding_changes_no_output_at_real_positions():
    model = tiny()
    short = to_numpy(model(batch([[5, 6, 7]], [[1, 9, 10]])))
    padded = to_numpy(model(batch([[5, 6, 7, 0, 0, 0]], [[1, 9, 10, 0, 0]])))
    np.testing.assert_allclose(padded[:, :3], short, atol=1e-5)


@pytest.mark.parametrize("depths", [{}, dict(num_layers=3, num_decoder_layers=1)])
def test_cached_decode_step_equals_full_pass(depths):
    model = tiny(num_heads=2, key_dim=16, value_dim=24, **depths)  # d_k != d_v too
    inputs = batch([[5, 6, 7, 0], [3, 4, 8, 9]], [[1, 8, 9, 10, 11], [1, 2, 3, 4, 5]])
    full = to_numpy(model(inputs))
    encoded, mask = model.encode(inputs["encoder_token_ids"])
    cache = model.init_cache(encoded, max_length=5)
    # Heads first: (batch, heads, positions, head_dim), self then cross.
    assert [tuple(c.shape) for c in cache["self"][0]] == [(2, 2, 5, 16), (2, 2, 5, 24)]
    assert [tuple(c.shape) for c in cache["cross"][0]] == [(2, 2, 4, 16), (2, 2, 4, 24)]
    steps = []
    for i in range(5):
        logits, cache = model.decode_step(
            inputs["decoder_token_ids"][:, i:i + 1], cache, i, mask
        )
        steps.append(to_numpy(logits))
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, atol=1e-5)


@pytest.mark.parametrize("overrides", [
    dict(norm_first=True),
    dict(learned_positions=True),
    dict(target_vocabulary_size=70),
    dict(tie_embeddings=False),
    dict(target_vocabulary_size=70, tie_embeddings=False),
    dict(activation="silu", gated=True),
])
def test_variants_build_and_agree_with_entry_points(overrides):
    model = tiny(**overrides)
    inputs = batch([[5, 6, 7, 0]], [[1, 8, 9]])
    logits = to_numpy(model(inputs))
    vocab = overrides.get("target_vocabulary_size", 50)
    assert logits.shape == (1, 3, vocab)
    encoded, mask = model.encode(inputs["encoder_token_ids"])
    np.testing.assert_allclose(
        to_numpy(model.decode(inputs["decoder_token_ids"], encoded, mask)), logits,
        atol=1e-5,
    )
    c = PRESETS["tiny"]["config"]
    d = c["d_model"]
    extra = {
        "norm_first": 4 * d,  # final LayerNorm of each stack
        "learned_positions": 2 * c["max_length"] * d,
        "target_vocabulary_size": 70 * d,  # a second embedding matrix
        "tie_embeddings": vocab * d,  # an untied output projection
        "activation": 0,
        "gated": 2 * c["num_layers"] * (d * c["d_ff"] + c["d_ff"]),  # V and c a block
    }
    expected = closed_form_params(c, 50) + sum(extra[k] for k in overrides)
    assert model.count_params() == expected


def test_decoder_depth_of_its_own_is_counted_and_saved(tmp_path):
    model = tiny(num_layers=3, num_decoder_layers=1)
    config = dict(PRESETS["tiny"]["config"], num_layers=3, num_decoder_layers=1)
    assert (len(model.encoder_blocks), len(model.decoder_blocks)) == (3, 1)
    assert model.count_params() == closed_form_params(config, 50)
    inputs = batch([[5, 6, 7, 0]], [[1, 8, 9]])
    model.save(tmp_path / "model.keras")
    loaded = keras.saving.load_model(tmp_path / "model.keras")
    assert len(loaded.decoder_blocks) == 1
    np.testing.assert_allclose(to_numpy(loaded(inputs)), to_numpy(model(inputs)), atol=1e-6)


def test_gated_feed_forward_is_saved_and_decodes_with_a_cache(tmp_path):
    model = tiny(activation="silu", gated=True)
    inputs = batch([[5, 6, 7, 0]], [[1, 8, 9]])
    model.save(tmp_path / "model.keras")
    loaded = keras.saving.load_model(tmp_path / "model.keras")
    assert all(block.feed_forward.gated for block in loaded.decoder_blocks)
    full = to_numpy(loaded(inputs))
    np.testing.assert_allclose(full, to_numpy(model(inputs)), atol=1e-6)
    encoded, mask = loaded.encode(inputs["encoder_token_ids"])
    cache = loaded.init_cache(encoded, max_length=3)
    steps = []
    for i in range(3):
        logits, cache = loaded.decode_step(inputs["decoder_token_ids"][:, i:i + 1], cache, i,
                                           mask)
        steps.append(to_numpy(logits))
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, atol=1e-5)


def test_shared_vocabulary_ties_all_three_matrices():
    model = tiny()
    embeddings = [w for w in model.weights if "embeddings" in w.path]
    assert len(embeddings) == 1
    assert model.source_embedding is model.target_embedding


def test_attention_scores_from_every_layer():
    model = tiny()
    inputs = batch([[5, 6, 7, 0]], [[1, 8, 9]])
    encoded, mask, enc_scores = model.encode(inputs["encoder_token_ids"],
                                             return_attention_scores=True)
    _, (self_scores, cross_scores) = model.decode(
        inputs["decoder_token_ids"], encoded, mask, return_attention_scores=True
    )
    assert len(enc_scores) == len(self_scores) == len(cross_scores) == 2
    assert tuple(enc_scores[0].shape) == (1, 4, 4, 4)
    assert tuple(cross_scores[1].shape) == (1, 4, 3, 4)
    # Padded source position 3 gets no weight; each row sums to 1.
    cross = to_numpy(cross_scores[0])
    np.testing.assert_allclose(cross[..., 3], 0.0, atol=1e-7)
    np.testing.assert_allclose(cross.sum(-1), 1.0, atol=1e-5)


def test_mixed_bfloat16_gives_finite_float32_logits():
    keras.config.set_dtype_policy("mixed_bfloat16")
    model = tiny()
    logits = model(batch([[5, 6, 7, 0], [0, 0, 0, 0]], [[1, 8, 9], [1, 0, 0]]))
    assert model.encoder_blocks[0].compute_dtype == "bfloat16"
    assert model.encoder_blocks[0].self_attention.query_dense.kernel.dtype == "float32"
    assert keras.backend.standardize_dtype(logits.dtype) == "float32"
    assert np.all(np.isfinite(to_numpy(logits)))


@pytest.mark.parametrize("overrides, message", [
    (dict(d_model=60, num_heads=8), "d_model=60, num_heads=8"),
    (dict(num_layers=0), "num_layers=0"),
    (dict(num_decoder_layers=0), "num_decoder_layers=0"),
    (dict(d_ff=-1), "d_ff=-1"),
    (dict(vocabulary_size=0), "vocabulary_size=0"),
    (dict(dropout_rate=1.0), "dropout_rate=1.0"),
    (dict(dropout_rate=-0.1), "dropout_rate=-0.1"),
    (dict(eos_id=8000), r"\[0, 8000\). Received: eos_id=8000"),
    (dict(bos_id=0), "three different ids"),
    (dict(pad_id=-1), "Received: pad_id=-1"),
])
def test_bad_arguments(overrides, message):
    config = dict(PRESETS["tiny"]["config"], key_dim=None, value_dim=None)
    config.update(overrides)
    with pytest.raises(ValueError, match=message):
        Transformer(**config)


def test_special_ids_are_carried_and_used_by_the_searches():
    from keras_transformer.decoding import greedy_search

    model = tiny(bos_id=5, eos_id=6)
    assert Transformer.from_config(model.get_config()).eos_id == 6
    source = np.array([[7, 8, 9]], "int32")
    # The model's own ids are the searches' defaults.
    default, _ = greedy_search(model, source, max_extra_length=3)
    explicit, _ = greedy_search(model, source, max_extra_length=3, bos_id=5, eos_id=6)
    np.testing.assert_array_equal(default, explicit)
    assert 5 not in default  # bos is never generated


def test_unknown_preset():
    with pytest.raises(ValueError, match="'huge'.*tiny, mini, small, base"):
        Transformer.from_preset("huge")


def test_sequence_longer_than_learned_positions():
    model = tiny(learned_positions=True, max_length=8)
    with pytest.raises(ValueError, match="max_length=8"):
        model(batch([[5] * 9], [[1, 2]]))
    # The sinusoid extends past max_length.
    sinusoid = tiny(max_length=8)
    assert tuple(sinusoid(batch([[5] * 9], [[1] * 12])).shape) == (1, 12, 50)


def _torch_transformer_with_our_weights(model):
    """`torch.nn.Transformer` (PyTorch's own, post- or pre-norm) holding
    `model`'s weights, and the embedding step written from the paper: the
    shared embedding times sqrt(d_model) plus the interleaved sinusoid."""
    import torch

    d, heads = model.d_model, model.num_heads
    reference = torch.nn.Transformer(
        d, heads, model.num_layers, len(model.decoder_blocks), model.d_ff, dropout=0.0,
        layer_norm_eps=model.layer_norm_epsilon, batch_first=True,
        norm_first=model.norm_first)
    if not model.norm_first:  # the paper's stacks end in their last block's norm
        reference.encoder.norm = reference.decoder.norm = None

    def tensor(x, transpose=False):
        x = to_numpy(x)
        return torch.from_numpy(np.ascontiguousarray(x.T if transpose else x))

    def attention(theirs, ours):
        dense = (ours.query_dense, ours.key_dense, ours.value_dense)
        theirs.in_proj_weight.data = torch.cat([tensor(x.kernel, True) for x in dense])
        theirs.in_proj_bias.data = torch.cat([tensor(x.bias) for x in dense])
        theirs.out_proj.weight.data = tensor(ours.output_dense.kernel, True)
        theirs.out_proj.bias.data = tensor(ours.output_dense.bias)

    def norm(theirs, ours):
        theirs.weight.data, theirs.bias.data = tensor(ours.gamma), tensor(ours.beta)

    def block(theirs, ours):
        """Self-attention, the feed-forward network and their norms."""
        attention(theirs.self_attn, ours.self_attention)
        theirs.linear1.weight.data = tensor(ours.feed_forward.inner_dense.kernel, True)
        theirs.linear1.bias.data = tensor(ours.feed_forward.inner_dense.bias)
        theirs.linear2.weight.data = tensor(ours.feed_forward.output_dense.kernel, True)
        theirs.linear2.bias.data = tensor(ours.feed_forward.output_dense.bias)
        norm(theirs.norm1, ours.self_attention_norm)
        # PyTorch numbers the norms in order: the decoder's second is cross-attention's.
        norm(theirs.norm3 if hasattr(theirs, "norm3") else theirs.norm2, ours.feed_forward_norm)

    for theirs, ours in zip(reference.encoder.layers, model.encoder_blocks):
        block(theirs, ours)
    for theirs, ours in zip(reference.decoder.layers, model.decoder_blocks):
        block(theirs, ours)
        attention(theirs.multihead_attn, ours.cross_attention)
        norm(theirs.norm2, ours.cross_attention_norm)
    if model.norm_first:
        norm(reference.encoder.norm, model.encoder_norm)
        norm(reference.decoder.norm, model.decoder_norm)
    embeddings = tensor(model.source_embedding.embeddings)

    def embed(ids):
        positions = np.arange(ids.shape[1])[:, None] / 10000 ** (np.arange(0, d, 2) / d)
        table = np.zeros((ids.shape[1], d), "float32")
        table[:, 0::2], table[:, 1::2] = np.sin(positions), np.cos(positions)
        return embeddings[torch.from_numpy(ids).long()] * d**0.5 + torch.from_numpy(table)

    def logits(source, target):
        steps = target.shape[1]
        causal = torch.ones(steps, steps, dtype=torch.bool).triu(1)  # True = hidden
        with torch.no_grad():
            hidden = reference.eval()(
                embed(source), embed(target), tgt_mask=causal,
                src_key_padding_mask=torch.from_numpy(source == 0),
                tgt_key_padding_mask=torch.from_numpy(target == 0),
                memory_key_padding_mask=torch.from_numpy(source == 0))
        return (hidden @ embeddings.T).numpy()

    return logits


@pytest.mark.parametrize("norm_first", [False, True])
def test_matches_torch_nn_transformer_with_the_same_weights(norm_first):
    # Unequal stacks (3 encoder blocks, 1 decoder block) check that each
    # stack gets its own depth; random offsets on every weight keep
    # LayerNorm scales and biases away from 1 and 0.
    from tests.models.keras_hub_weights import randomize

    keras.utils.set_random_seed(0)
    model = tiny(num_layers=3, num_decoder_layers=1, norm_first=norm_first)
    randomize(model)
    source = np.array([[5, 6, 7, 8, 0], [9, 10, 11, 12, 13]], "int32")
    target = np.array([[1, 14, 15, 0], [1, 16, 17, 18]], "int32")
    ours = to_numpy(model(batch(source, target)))
    theirs = _torch_transformer_with_our_weights(model)(source, target)
    real = target != 0
    np.testing.assert_allclose(ours[real], theirs[real], rtol=1e-4, atol=1e-4)
