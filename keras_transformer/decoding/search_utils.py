"""Pieces shared by greedy and beam search."""

import keras
import numpy as np
from keras import ops

from keras_transformer.checks import check_positive_int
from keras_transformer.decoding.compiled_search import is_traced

# Log-probability of an impossible choice: far below any real score, yet
# finite, so sums and divisions never make NaN.
NEG_INF = -1.0e9


def length_penalty(length, alpha):
    """GNMT's length penalty `((5 + length) / 6) ** alpha` (Wu et al., 2016),
    which the paper uses with alpha = 0.6."""
    return ops.power((5.0 + ops.cast(length, "float32")) / 6.0, alpha)


def step_log_probs(logits, step, limits, pad_id, bos_id, eos_id):
    """Log-probabilities of the next token, with the search's constraints.

    Padding and bos are never generated; a sentence whose output reached its
    length limit may only emit eos.

    Args:
        logits: float `(rows, vocab)` for the next token.
        step: int scalar, the 0-based index of the token being chosen (so
            `step + 1` tokens exist once it is chosen).
        limits: int `(rows,)`, each row's maximum output length (eos
            included).

    Returns:
        float32 `(rows, vocab)`.
    """
    log_probs = ops.log_softmax(ops.cast(logits, "float32"), axis=-1)
    vocab = ops.arange(ops.shape(log_probs)[-1], dtype="int32")[None, :]
    never = ops.logical_or(ops.equal(vocab, pad_id), ops.equal(vocab, bos_id))
    at_limit = ops.greater_equal(step + 1, limits)[:, None]  # (rows, 1)
    forced = ops.logical_and(at_limit, ops.not_equal(vocab, eos_id))
    return ops.where(ops.logical_or(never, forced), NEG_INF, log_probs)


def output_length(model, src_len, max_extra_length):
    """The length of the output buffer, static per input shape: `src_len +
    max_extra_length`, but never past the decoder's learned positional
    table (`model.max_decoder_length`), which has no row for a later
    position; sinusoids extend to any length."""
    length = src_len + max_extra_length
    table = model.max_decoder_length
    return length if table is None else min(length, table)


def output_limits(encoder_token_ids, pad_id, max_extra_length, max_steps):
    """The paper's maximum output length, input length + 50, per sentence,
    within the `max_steps` of the buffer.

    Returns:
        int32 `(batch,)`.
    """
    lengths = ops.sum(ops.cast(ops.not_equal(encoder_token_ids, pad_id), "int32"), 1)
    return ops.minimum(lengths + max_extra_length, max_steps)


def set_position(sequences, position, tokens):
    """`sequences[..., position] = tokens` without a scatter.

    sequences: int `(..., length)`; tokens: int `(...)`.
    """
    length = ops.shape(sequences)[-1]
    hit = ops.equal(ops.arange(length, dtype="int32"), position)
    return ops.where(hit, tokens[..., None], sequences)


def special_ids(model, bos_id, eos_id):
    """`(bos_id, eos_id)`: the given ones, else the model's."""
    return (model.bos_id if bos_id is None else bos_id,
            model.eos_id if eos_id is None else eos_id)


def search_outputs(outputs):
    """A search's outputs as NumPy arrays, or as they are inside a traced
    function (whose values do not exist yet)."""
    if is_traced(outputs[0]):
        return outputs
    return tuple(ops.convert_to_numpy(x) for x in outputs)


def check_search_inputs(model, encoder_token_ids, max_extra_length, bos_id, eos_id):
    """Raises a `ValueError` naming the bad argument and what is allowed,
    before anything is compiled: `encoder_token_ids` an integer
    `(batch, src_len)` array of source-vocabulary ids, `max_extra_length` a
    positive integer, `bos_id` and `eos_id` two different output-vocabulary
    ids other than `model.pad_id`."""
    check_positive_int("max_extra_length", max_extra_length)
    vocab, pad_id = model.output_vocabulary_size, model.pad_id
    for name, value in (("bos_id", bos_id), ("eos_id", eos_id)):
        if (not isinstance(value, (int, np.integer)) or isinstance(value, bool)
                or not 0 <= value < vocab or value == pad_id):
            raise ValueError(
                f"`{name}` must be a token id in [0, {vocab}) other than "
                f"pad_id={pad_id}. Received: {name}={value!r}"
            )
    if bos_id == eos_id:
        raise ValueError(
            f"`bos_id` and `eos_id` must differ. Received: bos_id={bos_id!r}, "
            f"eos_id={eos_id!r}"
        )
    traced = is_traced(encoder_token_ids)  # then only the shape and dtype are known
    if traced:
        ids = encoder_token_ids
        shape, dtype = tuple(ids.shape), keras.backend.standardize_dtype(ids.dtype)
    else:
        ids = ops.convert_to_numpy(encoder_token_ids)
        shape, dtype = ids.shape, ids.dtype
    if len(shape) != 2 or not np.issubdtype(np.dtype(dtype), np.integer):
        raise ValueError(
            "`encoder_token_ids` must be an integer array of shape (batch, "
            f"src_len). Received: shape={shape}, dtype={dtype}"
        )
    if traced:
        return
    outside = ids[(ids < 0) | (ids >= model.vocabulary_size)]
    if outside.size:
        raise ValueError(
            f"`encoder_token_ids` must be in [0, {model.vocabulary_size}) (the "
            f"source vocabulary). Received the id {outside[0]}"
        )
