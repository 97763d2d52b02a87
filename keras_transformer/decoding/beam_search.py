"""Beam search with a length penalty, as in the paper's section 6.1."""

import collections

from keras import ops

from keras_transformer.checks import check_non_negative, check_positive_int
from keras_transformer.decoding.compiled_search import compiled_search, search_loop
from keras_transformer.decoding.search_utils import (
    NEG_INF,
    check_search_inputs,
    length_penalty,
    output_length,
    output_limits,
    search_outputs,
    set_position,
    special_ids,
    step_log_probs,
)

BeamState = collections.namedtuple("BeamState", [
    "step",  # int32 scalar: tokens chosen so far
    "alive",  # int32 (batch, k, max_steps + 1): live sequences, bos first
    "alive_log_probs",  # float32 (batch, k): their summed log-probabilities
    "finished",  # int32 (batch, k, max_steps + 1): ended sequences
    "finished_scores",  # float32 (batch, k): their penalised scores
    "cache",  # the model's decoding cache, rows batch * k
])


def beam_search(model, encoder_token_ids, beam_size=4, alpha=0.6, num_return=1,
                max_extra_length=50, bos_id=None, eos_id=None):
    """Translates a batch with beam search (beam 4, alpha 0.6 in the paper).

    A hypothesis of `n` tokens (eos included) with summed log-probability
    `log P` scores `log P / ((5 + n) / 6) ** alpha`. Live and finished
    hypotheses are kept apart: each step expands the `beam_size` live ones,
    takes the top `2 * beam_size` candidates (so that even if all of
    `beam_size` end in eos, `beam_size` stay live), moves those among the top
    `beam_size` that end in eos to the finished set (which keeps the best
    `beam_size`) and keeps the best `beam_size` others live. With
    `beam_size=1` and `alpha=0` this is exactly greedy search. A finished
    hypothesis is never extended. The search stops early once, for every
    sentence, no live hypothesis can beat the `num_return`-th best finished
    one: a live score can only fall, so its best possible final score is its
    log-probability divided by the penalty at the maximum length.

    Decoding is incremental (`Transformer.decode_step`), the cache rows
    follow their beams, and the loop is one compiled program per input
    shape.

    Args:
        model: a `Transformer`.
        encoder_token_ids: int `(batch, src_len)`, padded with `model.pad_id`.
        beam_size: int, `k`.
        alpha: float, the length penalty exponent (0 = none).
        num_return: int in `[1, beam_size]`, hypotheses to return per
            sentence.
        max_extra_length: int, a sentence of `n` tokens gets at most
            `n + max_extra_length` output tokens, eos included.
        bos_id, eos_id: int, the start and end tokens (default: the
            model's).

    Returns:
        `(tokens, scores)` as NumPy arrays (tensors inside a traced
        function), best first: int32 `(batch, num_return, src_len +
        max_extra_length)` (eos then padding after each end) and float32
        `(batch, num_return)` penalised scores. A model with learned
        positions gets at most `model.max_length` output tokens: its
        positional table has no row past them.
    """
    bos_id, eos_id = special_ids(model, bos_id, eos_id)
    check_search_inputs(model, encoder_token_ids, max_extra_length, bos_id, eos_id)
    check_positive_int("beam_size", beam_size)
    if not isinstance(num_return, int) or not 1 <= num_return <= beam_size:
        raise ValueError(
            f"`num_return` must be in [1, beam_size={beam_size}]. "
            f"Received: num_return={num_return!r}"
        )
    check_non_negative("alpha", alpha)
    # alpha is an argument of the compiled search, so every alpha shares
    # its programs.
    key = ("beam", beam_size, num_return, max_extra_length, bos_id, eos_id)
    search = compiled_search(
        model, key,
        lambda ids, alpha: beam_search_fn(
            model, ids, beam_size, alpha, num_return, max_extra_length,
            bos_id, eos_id,
        ),
    )
    return search_outputs(search(encoder_token_ids, float(alpha)))


def _gather_beams(x, beam_indices):
    """x (batch, beams, ...), beam_indices int (batch, new_beams)
    --> (batch, new_beams, ...)."""
    index = beam_indices
    while len(index.shape) < len(x.shape):
        index = index[..., None]
    return ops.take_along_axis(x, index, axis=1)


def beam_search_fn(model, encoder_token_ids, beam_size, alpha, num_return,
                   max_extra_length, bos_id=None, eos_id=None):
    """The traceable beam search loop (`keras.ops` only); see `beam_search`.
    `alpha` is a float or a float32 scalar tensor."""
    bos_id, eos_id = special_ids(model, bos_id, eos_id)
    k = beam_size
    batch, src_len = ops.shape(encoder_token_ids)
    max_steps = output_length(model, src_len, max_extra_length)  # static per shape
    vocab = model.output_vocabulary_size
    alpha = ops.convert_to_tensor(alpha, "float32")

    # Every sentence is repeated k times: row b * k + j is beam j of b.
    limits = ops.repeat(
        output_limits(encoder_token_ids, model.pad_id, max_extra_length, max_steps), k
    )  # (batch * k,)
    encoded, source_mask = model.encode(encoder_token_ids)
    encoded = ops.repeat(encoded, k, axis=0)  # (batch * k, src_len, d_model)
    source_mask = ops.repeat(source_mask, k, axis=0)  # (batch * k, src_len)
    state = _initial_state(model, encoded, batch, k, max_steps, bos_id)
    best_possible_penalty = length_penalty(max_steps, alpha)

    def cond(*state):
        state = BeamState(*state)
        # Live beams are sorted, so beam 0 has the best possible final score.
        best_live = state.alive_log_probs[:, 0] / best_possible_penalty  # (batch,)
        nth_finished = state.finished_scores[:, num_return - 1]  # (batch,)
        done = ops.all(ops.greater_equal(nth_finished, best_live))
        return ops.logical_and(ops.less(state.step, max_steps), ops.logical_not(done))

    def body(constants, *state):
        limits, source_mask, alpha = constants  # the tensors of this call
        state = BeamState(*state)
        step = state.step
        tokens = ops.reshape(ops.take(state.alive, step, axis=2), (batch * k, 1))
        logits, cache = model.decode_step(tokens, state.cache, step, source_mask)
        # --> (batch * k, vocab)
        log_probs = step_log_probs(
            logits[:, 0], step, limits, model.pad_id, bos_id, eos_id
        )
        # --> (batch, k, vocab): the score of every one-token extension.
        candidates = state.alive_log_probs[:, :, None] + ops.reshape(
            log_probs, (batch, k, vocab)
        )
        # --> (batch, 2k): the best 2k extensions over all beams.
        top_log_probs, top_flat = ops.top_k(
            ops.reshape(candidates, (batch, k * vocab)), 2 * k
        )
        top_beams = ops.floor_divide(top_flat, vocab)  # the beam each extends
        top_tokens = ops.cast(ops.mod(top_flat, vocab), "int32")
        # --> (batch, 2k, max_steps + 1)
        top_sequences = set_position(
            _gather_beams(state.alive, top_beams), step + 1, top_tokens
        )
        ends = ops.equal(top_tokens, eos_id)  # (batch, 2k)
        finished, finished_scores = _merge_finished(
            state, top_sequences, top_log_probs, ends, step, alpha, k
        )
        # Live: the k best that did not end. --> (batch, k)
        alive_log_probs, keep = ops.top_k(ops.where(ends, NEG_INF, top_log_probs), k)
        alive = _gather_beams(top_sequences, keep)
        cache = _reorder_cache(cache, _gather_beams(top_beams, keep), batch, k)
        # (a plain tuple: the loop's state keeps one structure throughout)
        return tuple(BeamState(step + 1, alive, alive_log_probs, finished,
                               finished_scores, cache))

    final = BeamState(*search_loop(model, cond, body, tuple(state), max_steps,
                                   constants=(limits, source_mask, alpha)))
    # --> (batch, num_return, max_steps), without bos
    return (final.finished[:, :num_return, 1:],
            final.finished_scores[:, :num_return])


def _initial_state(model, encoded, batch, k, max_steps, bos_id):
    """Step 0: every live sequence is bos, only beam 0 is live (so the k
    beams do not start as copies), nothing is finished."""
    # Position 0 holds bos; position i + 1 the token chosen at step i.
    alive = ops.full((batch, k, max_steps + 1), model.pad_id, dtype="int32")
    alive = set_position(alive, 0, ops.full((batch, k), bos_id, "int32"))
    alive_log_probs = ops.tile(
        ops.convert_to_tensor([[0.0] + [NEG_INF] * (k - 1)], "float32"), (batch, 1)
    )  # (batch, k)
    return BeamState(
        step=ops.convert_to_tensor(0, "int32"),
        alive=alive,
        alive_log_probs=alive_log_probs,
        finished=ops.zeros_like(alive),
        finished_scores=ops.full((batch, k), NEG_INF, "float32"),
        cache=model.init_cache(encoded, max_steps),
    )


def _merge_finished(state, top_sequences, top_log_probs, ends, step, alpha, k):
    """The k best finished hypotheses: the old ones and those among the top
    k candidates that end in eos (only the top k, so a beam of 1 ends
    exactly where greedy search would).

    Returns:
        `(finished, finished_scores)`: `(batch, k, max_steps + 1)` and
        `(batch, k)`.
    """
    in_top_k = ops.less(ops.arange(2 * k, dtype="int32"), k)[None, :]  # (1, 2k)
    finishing = ops.logical_and(ends, in_top_k)  # (batch, 2k)
    new_scores = ops.where(
        finishing, top_log_probs / length_penalty(step + 1, alpha), NEG_INF
    )
    # --> (batch, 3k), then the best k
    merged_scores = ops.concatenate([state.finished_scores, new_scores], axis=1)
    merged = ops.concatenate([state.finished, top_sequences], axis=1)
    finished_scores, keep = ops.top_k(merged_scores, k)
    return _gather_beams(merged, keep), finished_scores


def _reorder_cache(cache, parents, batch, k):
    """Each live beam's self-attention cache rows follow the beam it
    extends; `parents` int `(batch, k)`. The cross-attention cache is the
    same for every beam of a sentence."""
    rows = ops.reshape(ops.arange(batch, dtype="int32")[:, None] * k + parents, (-1,))
    return {
        "self": [(ops.take(key, rows, axis=0), ops.take(value, rows, axis=0))
                 for key, value in cache["self"]],
        "cross": cache["cross"],
    }
