"""Beam search with a length penalty, as in the paper's section 6.1."""

from keras import ops

from keras_transformer.decoding.compile import compiled_search
from keras_transformer.decoding.search_utils import (
    NEG_INF,
    check_search_inputs,
    length_penalty,
    output_limits,
    set_position,
    step_log_probs,
)
from keras_transformer.validation import check_non_negative, check_positive_int


def beam_search(model, encoder_token_ids, beam_size=4, alpha=0.6, num_return=1,
                max_extra_length=50, bos_id=1, eos_id=2):
    """Translates a batch with beam search (beam 4, alpha 0.6 in the paper).

    A hypothesis of `n` tokens (eos included) with summed log-probability
    `log P` scores `log P / ((5 + n) / 6) ** alpha`. Live and finished
    hypotheses are kept apart: each step expands the `beam_size` live ones,
    takes the top `2 * beam_size` candidates (so that even if all of
    `beam_size` end in eos, `beam_size` stay live), moves those among the top
    `beam_size` that end in eos to the finished set (which keeps the best
    `beam_size`) and keeps the best `beam_size` others live. With
    `beam_size=1` and `alpha=0` this is exactly greedy search. A finished hypothesis is never extended. The
    search stops early once, for every sentence, no live hypothesis can
    beat the `num_return`-th best finished one: a live score can only fall,
    so its best possible final score is its log-probability divided by the
    penalty at the maximum length.

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
        bos_id, eos_id: int.

    Returns:
        `(tokens, scores)` as NumPy arrays, best first: int32
        `(batch, num_return, src_len + max_extra_length)` (eos then padding
        after each end) and float32 `(batch, num_return)` penalised scores.
    """
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
            model, ids, beam_size, alpha, num_return, max_extra_length, bos_id,
            eos_id,
        ),
    )
    tokens, scores = search(encoder_token_ids, float(alpha))
    return ops.convert_to_numpy(tokens), ops.convert_to_numpy(scores)


def _gather_beams(x, beam_indices):
    """x (batch, beams, ...), beam_indices int (batch, new_beams)
    --> (batch, new_beams, ...)."""
    index = beam_indices
    while len(index.shape) < len(x.shape):
        index = index[..., None]
    return ops.take_along_axis(x, index, axis=1)


def beam_search_fn(model, encoder_token_ids, beam_size, alpha, num_return,
                   max_extra_length, bos_id, eos_id):
    """The traceable beam search loop (`keras.ops` only); see `beam_search`.
    `alpha` is a float or a float32 scalar tensor."""
    pad_id = model.pad_id
    k = beam_size
    batch, src_len = ops.shape(encoder_token_ids)
    max_steps = src_len + max_extra_length  # static per shape bucket
    vocab = model.output_vocabulary_size

    # Every sentence is repeated k times: row b * k + j is beam j of b.
    limits = ops.repeat(output_limits(encoder_token_ids, pad_id, max_extra_length), k)
    encoded, source_mask = model.encode(encoder_token_ids)
    encoded = ops.repeat(encoded, k, axis=0)  # (batch * k, src_len, d_model)
    source_mask = ops.repeat(source_mask, k, axis=0)  # (batch * k, src_len)
    cache = model.init_cache(encoded, max_steps)

    # Position 0 holds bos; position i + 1 the token chosen at step i.
    alive = ops.full((batch, k, max_steps + 1), pad_id, dtype="int32")
    alive = set_position(alive, 0, ops.full((batch, k), bos_id, "int32"))
    # Only beam 0 is live at first, so the k beams do not start as copies.
    alive_log_probs = ops.tile(
        ops.convert_to_tensor([[0.0] + [NEG_INF] * (k - 1)], "float32"), (batch, 1)
    )  # (batch, k)
    finished = ops.zeros_like(alive)  # (batch, k, max_steps + 1)
    finished_scores = ops.full((batch, k), NEG_INF, "float32")
    best_possible_penalty = length_penalty(max_steps, alpha)

    def cond(step, alive, alive_log_probs, finished, finished_scores, cache):
        # Live beams are sorted, so beam 0 has the best possible final score.
        best_live = alive_log_probs[:, 0] / best_possible_penalty  # (batch,)
        nth_finished = finished_scores[:, num_return - 1]  # (batch,)
        done = ops.all(ops.greater_equal(nth_finished, best_live))
        return ops.logical_and(ops.less(step, max_steps), ops.logical_not(done))

    def body(step, alive, alive_log_probs, finished, finished_scores, cache):
        tokens = ops.reshape(ops.take(alive, step, axis=2), (batch * k, 1))
        logits, cache = model.decode_step(tokens, cache, step, source_mask)
        log_probs = step_log_probs(logits[:, 0], step, limits, pad_id, bos_id, eos_id)
        # --> (batch, k, vocab): the score of every one-token extension.
        candidates = alive_log_probs[:, :, None] + ops.reshape(log_probs, (batch, k, vocab))
        # --> (batch, 2k): the best 2k extensions over all beams.
        top_log_probs, top_flat = ops.top_k(ops.reshape(candidates, (batch, k * vocab)), 2 * k)
        top_beams = ops.floor_divide(top_flat, vocab)  # which live beam each extends
        top_tokens = ops.cast(ops.mod(top_flat, vocab), "int32")
        top_sequences = set_position(_gather_beams(alive, top_beams), step + 1, top_tokens)
        ends = ops.equal(top_tokens, eos_id)  # (batch, 2k)

        # Finished: those ending in eos among the top k candidates (so a
        # beam of 1 ends exactly where greedy search would) join the k best
        # finished so far.
        in_top_k = ops.less(ops.arange(2 * k, dtype="int32"), k)[None, :]
        finishing = ops.logical_and(ends, in_top_k)
        new_scores = ops.where(
            finishing, top_log_probs / length_penalty(step + 1, alpha), NEG_INF
        )
        merged_scores = ops.concatenate([finished_scores, new_scores], axis=1)
        merged = ops.concatenate([finished, top_sequences], axis=1)
        finished_scores, keep = ops.top_k(merged_scores, k)  # (batch, k)
        finished = _gather_beams(merged, keep)

        # Live: the k best that did not end.
        alive_log_probs, keep = ops.top_k(ops.where(ends, NEG_INF, top_log_probs), k)
        alive = _gather_beams(top_sequences, keep)

        # Each live beam's cache rows follow the beam it extends.
        parents = _gather_beams(top_beams, keep)  # (batch, k)
        rows = ops.reshape(ops.arange(batch, dtype="int32")[:, None] * k + parents, (-1,))
        cache = {
            "self": [(ops.take(key, rows, axis=0), ops.take(value, rows, axis=0))
                     for key, value in cache["self"]],
            "cross": cache["cross"],
        }
        return step + 1, alive, alive_log_probs, finished, finished_scores, cache

    state = (ops.convert_to_tensor(0, "int32"), alive, alive_log_probs, finished,
             finished_scores, cache)
    _, _, _, finished, finished_scores, _ = ops.while_loop(
        cond, body, state, maximum_iterations=max_steps
    )
    # --> (batch, num_return, max_steps), without bos
    return finished[:, :num_return, 1:], finished_scores[:, :num_return]
