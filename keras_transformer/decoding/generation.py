"""Continuing prompts with a causal language model and a keras-hub sampler.

keras-hub's samplers (greedy, random with a temperature, top-k, top-p,
beam) run the loop: each step calls `next(prompt, cache, index)` for the
logits of position `index`, picks a token and writes it into the prompt
buffer, keeping the prompt's own tokens where `mask` is set. This module
supplies `next` for a `CausalLM`, with its key/value cache, and compiles
the whole loop once per buffer shape (`compiled_search`).

Two rules are added in `next`, because keras-hub's loop has no notion of a
finished row: a row that has emitted a stop token (or padding) may only
emit padding from then on, with probability 1, so its beam score stops
changing and its output is padded after the stop token; and an unfinished
row never emits padding. Without the first, `BeamSampler` keeps extending
finished beams and ranks them by tokens past their end.
"""

import numpy as np
from keras import ops

from keras_transformer.checks import check_positive_int
from keras_transformer.decoding.compiled_search import CompiledSearch, model_searches
from keras_transformer.decoding.search_utils import NEG_INF


def generate(model, prompts, max_length=None, sampler="greedy",
             stop_token_ids="auto", use_cache=True):
    """Continues each prompt until a stop token or `max_length` tokens.

    Args:
        model: a `CausalLM`.
        prompts: int token ids, a list of lists (of any lengths) or an array
            `(batch, len)` padded with `model.pad_id` on the right. A prompt
            usually starts with `model.bos_id`; none may be empty.
        max_length: int, the length of the output buffer, prompt included.
            Default: `model.max_length`. One program is compiled per
            `(batch, max_length)`.
        sampler: a keras-hub sampler (`keras_hub.samplers.TopKSampler(k=10,
            seed=1)`, ...) or its name ("greedy", "random", "top_k",
            "top_p", "beam"). Its temperature and seed apply.
        stop_token_ids: ids that end a row: "auto" (`model.eos_id`), a
            sequence of ids, or None (run to `max_length`).
        use_cache: bool, decode one position a step with the key/value
            cache (default); False recomputes the whole prefix every step.

    Returns:
        int32 NumPy `(batch, max_length)`: each prompt, its continuation
        up to and including its stop token, then `model.pad_id`.
    """
    import keras_hub  # the samplers; imported here so the models need no keras-hub

    token_ids = _prompt_buffer(model, prompts, max_length)
    if stop_token_ids == "auto":
        stop_token_ids = (model.eos_id,)
    stop_token_ids = None if stop_token_ids is None else tuple(int(t) for t in stop_token_ids)
    searches = model_searches(model)
    key = ("generate", sampler, stop_token_ids, use_cache)
    if key not in searches:
        # One sampler object per key, so its seed state carries on from call
        # to call, and one program per buffer shape.
        chosen = keras_hub.samplers.get(sampler) if isinstance(sampler, str) else sampler
        searches[key] = CompiledSearch(
            model,
            lambda ids: _generate_fn(model, ids, chosen, stop_token_ids, use_cache),
            state=chosen.variables,
        )
    return np.asarray(ops.convert_to_numpy(searches[key](token_ids)), dtype="int32")


def _prompt_buffer(model, prompts, max_length):
    """The prompts right-padded into int32 `(batch, max_length)`, checked."""
    max_length = model.max_length if max_length is None else max_length
    check_positive_int("max_length", max_length)
    if model.max_decoder_length is not None and max_length > model.max_decoder_length:
        raise ValueError(
            f"`max_length` must be at most {model.max_decoder_length}, the "
            f"positions the model has embeddings for. Received: max_length={max_length}"
        )
    rows = [np.asarray(p, dtype="int64").reshape(-1) for p in prompts]
    if not rows:
        raise ValueError("`prompts` must hold at least one prompt. Received: []")
    buffer = np.full((len(rows), max_length), model.pad_id, dtype="int32")
    for i, row in enumerate(rows):
        real = np.flatnonzero(row != model.pad_id)
        row = row[: real[-1] + 1 if len(real) else 0]  # without trailing padding
        if not len(row) or (row == model.pad_id).any() or len(row) >= max_length:
            raise ValueError(
                f"Each prompt must hold 1 to {max_length - 1} token ids (below "
                f"`max_length`), none of them the padding id {model.pad_id}. "
                f"Received prompt {i}: {row.tolist()}"
            )
        if row.min() < 0 or row.max() >= model.vocabulary_size:
            raise ValueError(
                f"Token ids must be in [0, {model.vocabulary_size}). Received "
                f"prompt {i}: {row.tolist()}"
            )
        buffer[i, : len(row)] = row
    return buffer


def _generate_fn(model, token_ids, sampler, stop_token_ids, use_cache):
    """The traced loop: `(batch, max_length)` prompts --> the same, filled."""
    mask = ops.not_equal(token_ids, model.pad_id)  # the prompts' own tokens
    # The first position to fill: the shortest prompt's end.
    index = ops.min(ops.sum(ops.cast(mask, "int32"), axis=1))
    ends = (model.pad_id,) + (stop_token_ids or ())

    def constrained(logits, prompt, index):
        """`logits` (rows, vocab) of position `index`, finished rows pinned
        to padding and padding refused to the others."""
        previous = ops.take(prompt, index - 1, axis=1)  # (rows,)
        finished = ops.any(
            ops.stack([ops.equal(previous, t) for t in ends]), axis=0
        )[:, None]
        is_pad = ops.equal(ops.arange(model.vocabulary_size), model.pad_id)[None, :]
        pinned = ops.where(is_pad, 0.0, NEG_INF)
        return ops.where(finished, pinned, ops.where(is_pad, NEG_INF, logits))

    if use_cache:
        batch, length = ops.shape(token_ids)
        # Fill the cache from every position of the buffer at once; a row's
        # positions past its prompt are overwritten as they are generated,
        # and the causal mask hides them until then.
        _, cache = model.decode_step(token_ids, model.init_cache(batch, length), 0)

        def next(prompt, cache, index):
            step = ops.slice(prompt, (0, index - 1), (ops.shape(prompt)[0], 1))
            logits, cache = model.decode_step(step, cache, index - 1)
            return constrained(logits[:, 0], prompt, index), None, cache
    else:
        cache = None

        def next(prompt, cache, index):
            logits = model.logits(model.hidden_states(prompt, training=False))
            logits = ops.take(logits, index - 1, axis=1)
            return constrained(logits, prompt, index), None, cache

    outputs = sampler(
        next, token_ids, cache=cache, index=index, mask=mask,
        stop_token_ids=stop_token_ids, model=model,
    )
    # Positions the loop never reached (every row had stopped) hold padding.
    return outputs
