"""`CausalLM.generate` with keras-hub's samplers: cached equals uncached,
one program per shape, seeded sampling inside the top-k and top-p sets."""

import keras
import keras_hub
import numpy as np
import pytest

from keras_transformer import CausalLM
from keras_transformer.decoding.compiled_search import model_searches
from tests.helpers import numpy_softmax, to_numpy
from tests.models.keras_hub_weights import randomize

PROMPTS = [[1, 5, 6], [1, 7], [1, 9, 10, 11]]


def random_lm(vocabulary_size=30, **overrides):
    model = CausalLM.from_preset("gpt_tiny", vocabulary_size=vocabulary_size,
                                 num_layers=1, **overrides)
    randomize(model, scale=0.5)
    return model


def samplers(seed):
    """One of each kind, freshly seeded."""
    return {
        "greedy": keras_hub.samplers.GreedySampler(),
        "beam": keras_hub.samplers.BeamSampler(num_beams=3),
        "top_k": keras_hub.samplers.TopKSampler(k=5, seed=seed),
        "top_p": keras_hub.samplers.TopPSampler(p=0.8, seed=seed),
        "random": keras_hub.samplers.RandomSampler(temperature=0.7, seed=seed),
    }


@pytest.mark.parametrize("kind", ["greedy", "beam", "top_k", "top_p", "random"])
@pytest.mark.parametrize("norm_first", [False, True])
def test_cached_equals_uncached(kind, norm_first):
    model = random_lm(norm_first=norm_first)
    cached = model.generate(PROMPTS, 12, samplers(3)[kind], stop_token_ids=None)
    uncached = model.generate(PROMPTS, 12, samplers(3)[kind], stop_token_ids=None,
                              use_cache=False)
    np.testing.assert_array_equal(cached, uncached)
    for row, prompt in zip(cached, PROMPTS):  # prompts kept, no padding generated
        assert row[: len(prompt)].tolist() == prompt and (row != 0).all()


def test_greedy_picks_the_argmax_of_the_models_logits():
    model = random_lm()
    out = model.generate(PROMPTS, 8, "greedy", stop_token_ids=None)
    for row, prompt in zip(out, PROMPTS):
        for t in range(len(prompt), 8):
            logits = to_numpy(model({"token_ids": row[None, :t]}))[0, -1]
            logits[0] = -np.inf  # padding is never generated
            assert row[t] == np.argmax(logits)


def test_a_beam_of_one_is_greedy():
    model = random_lm()
    np.testing.assert_array_equal(
        model.generate(PROMPTS, 10, keras_hub.samplers.BeamSampler(num_beams=1)),
        model.generate(PROMPTS, 10, "greedy"),
    )


@pytest.mark.parametrize("kind", ["greedy", "beam"])
def test_a_stop_token_ends_the_row_and_padding_follows(kind):
    model = random_lm()
    free = model.generate(PROMPTS, 12, kind, stop_token_ids=None)
    stop = int(free[0, 4])  # a token row 0 generates
    out = model.generate(PROMPTS, 12, kind, stop_token_ids=[stop])
    for row, free_row, prompt in zip(out, free, PROMPTS):
        generated = free_row[len(prompt):].tolist()
        end = len(prompt) + (generated.index(stop) + 1 if stop in generated else len(generated))
        if kind == "greedy":  # greedy rows do not interact
            np.testing.assert_array_equal(row[:end], free_row[:end])
        assert (row[end:] == 0).all()
    assert (out[0, 5:] == 0).all() if kind == "greedy" else True


def test_the_same_seed_samples_the_same_and_the_state_moves_on():
    model = random_lm()
    prompts = [[1, 5]] * 16
    first = model.generate(prompts, 10, keras_hub.samplers.TopKSampler(k=8, seed=11))
    same = model.generate(prompts, 10, keras_hub.samplers.TopKSampler(k=8, seed=11))
    np.testing.assert_array_equal(first, same)
    sampler = keras_hub.samplers.TopKSampler(k=8, seed=11)
    once = model.generate(prompts, 10, sampler)
    again = model.generate(prompts, 10, sampler)
    np.testing.assert_array_equal(once, first)
    assert (once != again).any()  # a sampler's seed state carries on


def _next_token_probabilities(model, prompt):
    logits = to_numpy(model({"token_ids": np.array([prompt], "int32")}))[0, -1]
    logits[0] = -np.inf  # padding is never generated
    return numpy_softmax(logits)


@pytest.mark.parametrize("kind", ["top_k", "top_p"])
def test_top_k_and_top_p_never_pick_outside_their_sets(kind):
    # The new model's next-token distribution is spread out.
    model = CausalLM.from_preset("gpt_tiny", vocabulary_size=40, num_layers=1)
    prompt = [1, 5, 9]
    probs = _next_token_probabilities(model, prompt)
    order = np.argsort(-probs)
    if kind == "top_k":
        allowed, sampler = set(order[:4]), keras_hub.samplers.TopKSampler(k=4, seed=5)
    else:
        # The most likely tokens until their mass reaches p, that one
        # included: the 6 most likely for a p between their mass and 5's.
        mass = np.cumsum(probs[order])
        p = float(mass[4] + mass[5]) / 2
        allowed = set(order[:6])
        sampler = keras_hub.samplers.TopPSampler(p=p, seed=5)
    picked = set()
    for _ in range(4):
        out = model.generate([prompt] * 64, len(prompt) + 1, sampler)
        picked |= set(out[:, -1].tolist())
    assert picked <= allowed, (picked, allowed)
    assert len(picked) >= 2  # it samples, not argmax
    assert len(allowed) < 40


def test_one_program_per_shape():
    # PyTorch runs the loop eagerly: every call runs the Python function.
    eager = keras.backend.backend() == "torch"
    model = random_lm()
    sampler = keras_hub.samplers.TopKSampler(k=4, seed=1)
    model.generate(PROMPTS, 12, sampler)
    (search,) = model_searches(model).values()
    assert search.trace_count == 1
    model.generate([[1, 2, 3], [1, 4], [1, 5]], 12, sampler)  # same shape
    assert search.trace_count == (2 if eager else 1)
    model.generate(PROMPTS, 16, sampler)  # a longer buffer: one new program
    assert search.trace_count == (3 if eager else 2)


@pytest.mark.parametrize("prompts, max_length, message", [
    ([], 8, "at least one prompt"),
    ([[]], 8, "1 to 7 token ids"),
    ([[1, 0, 5]], 8, "padding id 0"),
    ([[1, 2, 3]], 3, "1 to 2 token ids"),
    ([[1, 99]], 8, r"in \[0, 30\)"),
    ([[1, 2]], 300, "at most 256"),
    ([[1, 2]], 0, "positive integer"),
])
def test_bad_prompts_are_refused(prompts, max_length, message):
    with pytest.raises(ValueError, match=message):
        random_lm().generate(prompts, max_length)
