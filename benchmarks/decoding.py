"""Cached against uncached beam search, side by side in one run.

The uncached side runs the very same beam search (same code, same scores)
through a stand-in model whose `decode_step` keeps the generated tokens in
a fixed buffer and recomputes the whole decoder over it every step, which is
what decoding costs without a key/value cache.
"""

import statistics
import time

import keras
import numpy as np
from keras import ops

import keras_transformer as kt
from keras_transformer.decoding.beam_search import beam_search_fn
from keras_transformer.decoding.compile import CompiledSearch


class UncachedDecoder:
    """The `Transformer` decoding interface without a key/value cache."""

    def __init__(self, model):
        self.model = model
        self.pad_id = model.pad_id
        self.output_vocabulary_size = model.output_vocabulary_size
        self.variables = model.variables

    def encode(self, encoder_token_ids):
        return self.model.encode(encoder_token_ids)

    def init_cache(self, encoder_output, max_length):
        batch = ops.shape(encoder_output)[0]
        tokens = ops.zeros((batch, max_length), "int32")
        # Laid out like the real cache so beam search reorders the token
        # buffer with the beams; the encoder output rides along unchanged.
        return {"self": [(tokens, tokens)], "cross": [(encoder_output, encoder_output)]}

    def decode_step(self, decoder_token_ids, cache, index, encoder_padding_mask):
        tokens, _ = cache["self"][0]
        tokens = ops.slice_update(tokens, [0, index], decoder_token_ids)
        encoded = cache["cross"][0][0]
        logits = self.model.decode(tokens, encoded, encoder_padding_mask)  # full pass
        step_logits = ops.take(logits, index, axis=1)[:, None, :]
        return step_logits, {"self": [(tokens, tokens)], "cross": cache["cross"]}


def timed(fn, *args):
    start = time.perf_counter()
    keras.ops.convert_to_numpy(fn(*args)[0])
    return time.perf_counter() - start


def run(d_model=256, num_layers=3, vocabulary_size=8000, batch=8, source_length=14,
        max_extra_length=50, beam_size=4, rounds=3):
    """Returns a dict of the measured figures (seconds and ratios)."""
    model = kt.Transformer(vocabulary_size=vocabulary_size, num_layers=num_layers,
                           d_model=d_model, num_heads=4, d_ff=4 * d_model)
    rng = np.random.default_rng(0)
    source = rng.integers(4, vocabulary_size, (batch, source_length)).astype("int32")
    # Every hypothesis runs to the length limit: eos is never likely enough
    # for an untrained model, so both sides decode source_length + 50 steps.
    def search(decoder):
        return CompiledSearch(decoder, lambda ids: beam_search_fn(
            decoder, ids, beam_size, 0.6, 1, max_extra_length, 1, 2))
    cached, uncached = search(model), search(UncachedDecoder(model))
    same = np.array_equal(keras.ops.convert_to_numpy(cached(source)[0]),
                          keras.ops.convert_to_numpy(uncached(source)[0]))
    times = {"cached": [], "uncached": []}
    for _ in range(rounds):  # alternate A and B
        times["cached"].append(timed(cached, source))
        times["uncached"].append(timed(uncached, source))
    ratios = [u / c for u, c in zip(times["uncached"], times["cached"])]
    return {
        "backend": keras.backend.backend(),
        "output_length": source_length + max_extra_length,
        "same_output": same,
        "cached_s": statistics.median(times["cached"]),
        "uncached_s": statistics.median(times["uncached"]),
        "speedup_median": statistics.median(ratios),
        "speedup_min": min(ratios),
        "speedup_max": max(ratios),
        "sentences_per_s": batch / statistics.median(times["cached"]),
    }
