"""Greedy decoding with the key/value cache."""

from keras import ops

from keras_transformer.decoding.compiled_search import compiled_search, search_loop
from keras_transformer.decoding.search_utils import (
    check_search_inputs, output_length, output_limits, search_outputs, set_position,
    special_ids, step_log_probs,
)


def greedy_search(model, encoder_token_ids, max_extra_length=50, bos_id=None,
                  eos_id=None):
    """Translates a batch by taking the most probable token at every step.

    Decoding is incremental (`Transformer.decode_step`: one token a step,
    cached self-attention keys and values, cross-attention projected once)
    and the whole loop is one compiled program per input shape (see
    `keras_transformer.decoding.compiled_search`).

    Args:
        model: a `Transformer`.
        encoder_token_ids: int `(batch, src_len)`, padded with `model.pad_id`;
            sentences may have different lengths.
        max_extra_length: int, a sentence of `n` tokens gets at most
            `n + max_extra_length` output tokens, eos included (50 in the
            paper).
        bos_id, eos_id: int, the start and end tokens (default: the
            model's).

    Returns:
        `(tokens, scores)` as NumPy arrays (tensors inside a traced
        function): int32 `(batch, src_len + max_extra_length)` output tokens
        (without bos; eos, then padding, after each sentence's end; fewer
        columns if that passes a learned positional table) and float32
        `(batch,)` summed token log-probabilities.
    """
    bos_id, eos_id = special_ids(model, bos_id, eos_id)
    check_search_inputs(model, encoder_token_ids, max_extra_length, bos_id, eos_id)
    key = ("greedy", max_extra_length, bos_id, eos_id)
    search = compiled_search(
        model, key,
        lambda ids: greedy_search_fn(model, ids, max_extra_length, bos_id, eos_id),
    )
    return search_outputs(search(encoder_token_ids))


def greedy_search_fn(model, encoder_token_ids, max_extra_length, bos_id=None,
                     eos_id=None):
    """The traceable greedy loop (`keras.ops` only); see `greedy_search`."""
    bos_id, eos_id = special_ids(model, bos_id, eos_id)
    pad_id = model.pad_id
    batch, src_len = ops.shape(encoder_token_ids)
    max_steps = output_length(model, src_len, max_extra_length)  # static per shape
    limits = output_limits(encoder_token_ids, pad_id, max_extra_length, max_steps)  # (batch,)

    encoded, source_mask = model.encode(encoder_token_ids)
    cache = model.init_cache(encoded, max_steps)
    # Position 0 holds bos; position i + 1 the token chosen at step i.
    sequences = ops.full((batch, max_steps + 1), pad_id, dtype="int32")
    sequences = set_position(sequences, 0, ops.full((batch,), bos_id, "int32"))
    finished = ops.zeros((batch,), "bool")
    scores = ops.zeros((batch,), "float32")

    def cond(step, sequences, finished, scores, cache):
        return ops.logical_and(
            ops.less(step, max_steps), ops.logical_not(ops.all(finished))
        )

    def body(constants, step, sequences, finished, scores, cache):
        limits, source_mask = constants  # the tensors of this call
        tokens = ops.take(sequences, step, axis=1)[:, None]  # (batch, 1)
        logits, cache = model.decode_step(tokens, cache, step, source_mask)
        # --> (batch, vocab)
        log_probs = step_log_probs(logits[:, 0], step, limits, pad_id, bos_id, eos_id)
        chosen = ops.cast(ops.argmax(log_probs, axis=-1), "int32")  # (batch,)
        chosen_log_prob = ops.squeeze(
            ops.take_along_axis(log_probs, chosen[:, None], axis=-1), -1
        )  # (batch,)
        chosen = ops.where(finished, pad_id, chosen)
        scores = scores + ops.where(finished, 0.0, chosen_log_prob)
        sequences = set_position(sequences, step + 1, chosen)  # --> (batch, max_steps + 1)
        finished = ops.logical_or(finished, ops.equal(chosen, eos_id))
        return step + 1, sequences, finished, scores, cache

    _, sequences, _, scores, _ = search_loop(
        model, cond, body,
        (ops.convert_to_tensor(0, "int32"), sequences, finished, scores, cache),
        max_steps, constants=(limits, source_mask),
    )
    return sequences[:, 1:], scores  # --> (batch, max_steps), (batch,)
