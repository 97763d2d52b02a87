import contextlib
import gc
import itertools
import logging
import weakref

import keras
import numpy as np
import pytest

import keras_transformer as kt
from keras_transformer.decoding import beam_search, greedy_search
from keras_transformer.decoding.compiled_search import (
    CompiledSearch,
    model_searches,
    write_cache,
)
from keras_transformer.decoding.beam_search import beam_search_fn
from keras_transformer.decoding.greedy_search import greedy_search_fn
from tests.helpers import to_numpy

PAD, BOS, EOS = 0, 1, 2


def random_model(vocabulary_size=20, seed=0):
    keras.utils.set_random_seed(seed)
    return kt.Transformer.from_preset(
        "tiny", vocabulary_size=vocabulary_size, num_layers=1
    )


def until_eos(tokens):
    tokens = list(tokens)
    return tokens[: tokens.index(EOS) + 1] if EOS in tokens else tokens


SOURCES = np.array([[5, 6, 7, 0, 0], [9, 10, 11, 12, 13], [4, 0, 0, 0, 0]], "int32")


@pytest.mark.parametrize("seed", [0, 1])
def test_beam_of_one_without_penalty_is_greedy(seed):
    model = random_model(seed=seed)
    tokens, scores = greedy_search(model, SOURCES, max_extra_length=6)
    beam_tokens, beam_scores = beam_search(
        model, SOURCES, beam_size=1, alpha=0.0, max_extra_length=6
    )
    np.testing.assert_array_equal(beam_tokens[:, 0], tokens)
    np.testing.assert_allclose(beam_scores[:, 0], scores, rtol=1e-5)


def test_greedy_tokens_and_scores_match_a_full_decoder_pass():
    model = random_model()
    tokens, scores = greedy_search(model, SOURCES, max_extra_length=6)
    for source, output, score in zip(SOURCES, tokens, scores):
        output = until_eos(output)
        source = source[source != PAD][None]
        decoder_input = np.array([[BOS] + output[:-1]], "int32")
        encoded, mask = model.encode(source)
        log_probs = to_numpy(keras.ops.log_softmax(
            model.decode(decoder_input, encoded, mask), axis=-1))[0]
        allowed = log_probs.copy()
        allowed[:, [PAD, BOS]] = -np.inf
        limit = source.shape[1] + 6
        for i, token in enumerate(output):
            if i + 1 < limit:  # before the limit, greedy takes the argmax
                assert token == allowed[i].argmax()
        assert score == pytest.approx(sum(log_probs[i, t] for i, t in enumerate(output)), rel=1e-4)
        assert len(output) <= limit and output[-1] == EOS


def test_batched_decoding_equals_one_sentence_at_a_time():
    model = random_model()
    batched, _ = greedy_search(model, SOURCES, max_extra_length=4)
    beams, _ = beam_search(model, SOURCES, beam_size=3, max_extra_length=4)
    for i, source in enumerate(SOURCES):
        alone = source[source != PAD][None]
        single, _ = greedy_search(model, alone, max_extra_length=4)
        assert until_eos(single[0]) == until_eos(batched[i])
        single_beam, _ = beam_search(model, alone, beam_size=3, max_extra_length=4)
        assert until_eos(single_beam[0, 0]) == until_eos(beams[i, 0])


@pytest.fixture(scope="module")
def exhaustive():
    """A model with pad, bos, eos and two symbols, a 2-token source (so at
    most 4 output tokens), and the summed log-probability of every possible
    output (symbols then eos), each from a full decoder pass."""
    model = random_model(vocabulary_size=5, seed=3)
    source = np.array([[3, 4]], "int32")
    encoded, mask = model.encode(source)
    outputs = [list(body) + [EOS] for length in range(4)
               for body in itertools.product([3, 4], repeat=length)]
    totals = []
    for output in outputs:
        decoder_input = np.array([[BOS] + output[:-1]], "int32")
        log_probs = to_numpy(keras.ops.log_softmax(
            model.decode(decoder_input, encoded, mask), axis=-1))[0]
        totals.append(sum(log_probs[i, t] for i, t in enumerate(output)))
    return model, source, outputs, totals


@pytest.mark.parametrize("alpha", [0.0, 0.6, 2.0])
def test_wide_beam_finds_the_exhaustive_best(exhaustive, alpha):
    model, source, outputs, totals = exhaustive
    expected = sorted(
        ((total / ((5 + len(out)) / 6) ** alpha, out) for out, total in zip(outputs, totals)),
        key=lambda r: -r[0],
    )
    # 15 possible outputs and at most 12 candidates a step: a beam of 16
    # holds every one, so beam search must rank them exactly.
    tokens, scores = beam_search(
        model, source, beam_size=16, alpha=alpha, num_return=15, max_extra_length=2
    )
    for rank in range(15):
        assert until_eos(tokens[0, rank]) == expected[rank][1]
        assert scores[0, rank] == pytest.approx(expected[rank][0], rel=1e-4)


def test_every_alpha_shares_the_compiled_search():
    # (The exhaustive test checks each alpha's result.)
    model = random_model()
    for alpha in (0.0, 0.6, 2.0):
        beam_search(model, SOURCES, beam_size=2, alpha=alpha, max_extra_length=3)
    searches = list(model_searches(model).values())
    assert len(searches) == 1
    if keras.backend.backend() in ("jax", "tensorflow"):
        assert searches[0].trace_count == 1  # one program for the three alphas


def test_compiled_searches_belong_to_their_model():
    model = random_model()
    beam_search(model, SOURCES, beam_size=2, max_extra_length=3)
    greedy_search(model, SOURCES, max_extra_length=3)
    assert len(model_searches(model)) == 2
    assert not model_searches(random_model())  # a new model starts with none
    # No table outside the model keeps it (and its programs) alive.
    alive = weakref.ref(model)
    del model
    gc.collect()
    assert alive() is None


def test_paper_beam_returns_sorted_n_best_within_the_length_limit():
    model = random_model()
    tokens, scores = beam_search(model, SOURCES, beam_size=4, alpha=0.6,
                                 num_return=3, max_extra_length=3)
    assert tokens.shape == (3, 3, 5 + 3) and scores.shape == (3, 3)
    assert np.all(np.diff(scores, axis=1) <= 1e-6)  # best first
    for source, hypotheses in zip(SOURCES, tokens):
        limit = int((source != PAD).sum()) + 3
        for hypothesis in hypotheses:
            output = until_eos(hypothesis)
            assert output[-1] == EOS and len(output) <= limit
            assert PAD not in output and BOS not in output


def test_the_loop_traces_once_per_shape_bucket():
    model = random_model()
    search = CompiledSearch(model, lambda ids: greedy_search_fn(model, ids, 4, BOS, EOS))
    first = to_numpy(search(SOURCES)[0])
    second = to_numpy(search(SOURCES[::-1].copy())[0])
    np.testing.assert_array_equal(first[::-1], second)
    if keras.backend.backend() in ("jax", "tensorflow"):
        assert search.trace_count == 1  # same shape: the compiled program again
        search(SOURCES[:, :4])
        assert search.trace_count == 2  # a new shape bucket: one new trace
    else:
        # PyTorch runs the search in Python on every call, without
        # autograd, and replays the trace of the loop's body that the first
        # call of the shape recorded (`search_loop`).
        tokens, scores = search(SOURCES)
        assert search.trace_count == 3 and not scores.requires_grad
        assert len(search.traces) == 1
        search(SOURCES[:, :4])
        assert len(search.traces) == 2


def test_one_trace_per_shape_bucket_raises_no_retracing_warning():
    # Translating a test set decodes a batch of each length bucket: a trace
    # per shape, by design. TensorFlow warned of "frequent retracing" from
    # the fifth trace in ten calls, on the user's stderr.
    model = random_model()
    search = CompiledSearch(model, lambda ids: greedy_search_fn(model, ids, 2, BOS, EOS))
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logging.getLogger("tensorflow").addHandler(handler)
    try:
        shapes = [(batch, length) for batch in (1, 2, 3) for length in (3, 4, 5)]
        for batch, length in shapes + shapes:
            search(SOURCES[:batch, :length])
    finally:
        logging.getLogger("tensorflow").removeHandler(handler)
    assert [r.getMessage() for r in records if "retracing" in r.getMessage()] == []
    if keras.backend.backend() in ("jax", "tensorflow"):
        assert search.trace_count == len(shapes)  # the second pass traces nothing
    else:
        assert len(search.traces) == len(shapes)


@pytest.mark.parametrize("kwargs, message", [
    (dict(beam_size=0), "beam_size=0"),
    (dict(beam_size=2, num_return=3), r"num_return=3"),
    (dict(alpha=-1.0), "alpha=-1.0"),
    (dict(alpha=float("nan")), "alpha=nan"),
    (dict(alpha="1.0"), "alpha='1.0'"),
])
def test_bad_beam_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        beam_search(random_model(), SOURCES, **kwargs)


@pytest.mark.parametrize("search", [greedy_search, beam_search])
@pytest.mark.parametrize("ids, kwargs, message", [
    (SOURCES[0], {}, r"shape \(batch, src_len\).*shape=\(5,\)"),
    (SOURCES.astype("float32"), {}, "dtype=float32"),
    (SOURCES + 15, {}, r"\[0, 20\) \(the source vocabulary\). Received the id 20"),
    (SOURCES - 1, {}, "Received the id -1"),
    (SOURCES, dict(max_extra_length=0), "max_extra_length=0"),
    (SOURCES, dict(max_extra_length=2.5), "max_extra_length=2.5"),
    (SOURCES, dict(eos_id=20), r"\[0, 20\) other than pad_id=0. Received: eos_id=20"),
    (SOURCES, dict(bos_id=0), "Received: bos_id=0"),
    (SOURCES, dict(bos_id=2), "must differ"),
])
def test_bad_search_inputs_fail_before_compiling(search, ids, kwargs, message):
    model = random_model()
    with pytest.raises(ValueError, match=message):
        search(model, ids, **kwargs)
    assert not model_searches(model)


@pytest.mark.parametrize("search", [greedy_search, beam_search])
def test_learned_positions_bound_the_output_in_the_compiled_search(search):
    keras.utils.set_random_seed(0)
    model = kt.Transformer.from_preset(
        "tiny", vocabulary_size=20, num_layers=1, learned_positions=True, max_length=6
    )
    # 5 + 50 positions would run past the 6 learned ones: the buffer stops
    # there, and every output still ends in eos within it.
    tokens, _ = search(model, SOURCES, max_extra_length=50)
    rows = tokens if tokens.ndim == 2 else tokens[:, 0]
    assert rows.shape == (3, 6)
    for row in rows:
        assert EOS in row.tolist()
    assert model_searches(model)  # it ran as a compiled search
    # Sinusoids extend: the same model with them decodes 5 + 50 tokens.
    sinusoids = kt.Transformer.from_preset("tiny", vocabulary_size=20, num_layers=1, max_length=6)
    tokens, _ = search(sinusoids, SOURCES, max_extra_length=50)
    assert tokens.shape[-1] == 55


@pytest.mark.parametrize("make_fn", [
    lambda model: lambda ids: greedy_search_fn(model, ids, 6, BOS, EOS),
    lambda model: lambda ids: beam_search_fn(model, ids, 3, 0.6, 2, 6, BOS, EOS),
], ids=["greedy", "beam"])
def test_the_compiled_loop_equals_the_loop_run_op_by_op(make_fn):
    """jax.jit, XLA and PyTorch's traced body (`search_loop`) give the
    tokens and scores of the same loop run op by op: on PyTorch, with
    autograd on, where no step is traced and caches are not written in
    place. The second source, of the same shape, replays the first one's
    program or trace. The weights are scaled up, so that choices vary and
    searches end at different steps."""
    model = random_model(seed=3)
    for layer_weights in model.weights:  # far from uniform: varied choices
        layer_weights.assign(layer_weights * 4.0)
    fn = make_fn(model)
    search = CompiledSearch(model, fn)
    if keras.backend.backend() == "torch":
        import torch

        op_by_op_mode = torch.enable_grad()
    else:
        op_by_op_mode = contextlib.nullcontext()
    others = np.array([[8, 3, 0, 0, 0], [12, 11, 10, 9, 0], [7, 7, 7, 7, 7]], "int32")
    for sources in (SOURCES, others):
        compiled = [to_numpy(x) for x in search(sources)]
        with op_by_op_mode:
            op_by_op = [to_numpy(x) for x in fn(keras.ops.convert_to_tensor(sources))]
        np.testing.assert_array_equal(compiled[0], op_by_op[0])
        np.testing.assert_allclose(compiled[1], op_by_op[1], rtol=1e-5, atol=1e-5)
        rows = compiled[0].reshape(-1, compiled[0].shape[-1])
        assert len({tuple(until_eos(t)) for t in rows}) > 2


def test_write_cache_equals_slice_update_and_is_in_place_only_without_autograd():
    rng = np.random.default_rng(0)
    start = [0, 0, keras.ops.convert_to_tensor(3), 0]
    update = rng.normal(size=(2, 2, 1, 4)).astype("float32")
    expected = np.zeros((2, 2, 6, 4), "float32")
    expected[:, :, 3:4] = update

    def write():
        buffer = keras.ops.zeros((2, 2, 6, 4))
        return buffer, write_cache(buffer, keras.ops.convert_to_tensor(update), start)

    buffer, written = write()  # autograd (where there is one) records
    np.testing.assert_array_equal(to_numpy(written), expected)
    assert not to_numpy(buffer).any()
    if keras.backend.backend() == "torch":
        import torch

        with torch.no_grad():  # as the decoding loop runs: the buffer itself
            buffer, written = write()
        assert written is buffer
        np.testing.assert_array_equal(to_numpy(buffer), expected)
