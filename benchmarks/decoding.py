"""Cached against uncached beam search, side by side in one run.

The uncached side runs the very same beam search (same code, same scores)
through a stand-in model whose `decode_step` keeps the generated tokens in
a fixed buffer and recomputes the whole decoder over it every step, which is
what decoding costs without a key/value cache.
"""

import keras
import numpy as np
from keras import ops

import keras_transformer as kt
from keras_transformer.decoding.beam_search import beam_search_fn
from keras_transformer.decoding.compiled_search import CompiledSearch
from keras_transformer.special_tokens import BOS_ID, PAD_ID

from benchmarks.timing import compare


class UncachedDecoder:
    """The `Transformer` decoding interface without a key/value cache."""

    def __init__(self, model):
        self.model = model
        self.pad_id, self.bos_id, self.eos_id = model.pad_id, model.bos_id, model.eos_id
        self.output_vocabulary_size = model.output_vocabulary_size
        self.max_decoder_length = model.max_decoder_length
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


class KerasHubBart:
    """keras-hub's own encoder-decoder generation at the same sizes, as a
    keras-hub user runs it: `BartBackbone` + `BartSeq2SeqLM.generate_step`
    with `BeamSampler`, compiled by keras-hub (`make_generate_function`).

    Same matmul dimensions as ours (d_model, heads, d_ff, layers,
    vocabulary, tied output); BART adds learned positions, a LayerNorm on
    the embeddings and GELU. Its generation seeds the caches with one full
    decoder pass over the output buffer, stacks the per-layer caches into
    one `(batch, layers, 2, length, heads, head_dim)` tensor each step and
    stops when every beam has emitted eos (never, untrained: like ours, it
    decodes every step).
    """

    def __init__(self, model, beam_size, output_length):
        import keras_hub

        backbone = keras_hub.models.BartBackbone(
            vocabulary_size=model.vocabulary_size, num_layers=model.num_layers,
            num_heads=model.num_heads, hidden_dim=model.d_model,
            intermediate_dim=model.d_ff,
            max_sequence_length=output_length + 1)
        self.lm = keras_hub.models.BartSeq2SeqLM(backbone=backbone, preprocessor=None)
        self.lm.compile(sampler=keras_hub.samplers.BeamSampler(num_beams=beam_size))
        self.generate = self.lm.make_generate_function()
        self.output_length = output_length

    def __call__(self, encoder_token_ids):
        ids = ops.convert_to_numpy(encoder_token_ids)
        decoder = np.full((ids.shape[0], self.output_length + 1), PAD_ID, "int32")
        decoder[:, 0] = BOS_ID  # the sampler fills the rest
        inputs = {"encoder_token_ids": ids, "encoder_padding_mask": ids != PAD_ID,
                  "decoder_token_ids": decoder,
                  "decoder_padding_mask": decoder != PAD_ID}
        return self.generate(inputs, None)["decoder_token_ids"], None


class KerasHubBeamSearch:
    """keras-hub's `BeamSampler` driven by the same model and cache.

    The sampler calls `next(prompt, cache, index)`; here that is one cached
    `Transformer.decode_step`, with the cross-attention keys and values and
    the source mask carried in the cache (keras-hub repeats and reorders
    every cache entry along the beams). It has no length penalty and no
    early stop, so it always decodes to the end of the buffer; the
    benchmark uses an untrained model that never emits eos, so our search
    also decodes every step and both do the same amount of work.
    """

    def __init__(self, model, beam_size, max_extra_length):
        import keras_hub

        self.model = model
        self.sampler = keras_hub.samplers.BeamSampler(num_beams=beam_size)
        self.max_extra_length = max_extra_length

    def __call__(self, encoder_token_ids):
        model = self.model
        batch, src_len = ops.shape(encoder_token_ids)
        max_steps = src_len + self.max_extra_length
        encoded, source_mask = model.encode(encoder_token_ids)
        cache = model.init_cache(encoded, max_steps)
        cache["source_mask"] = source_mask
        prompt = ops.concatenate([  # bos, then the buffer the sampler fills
            ops.full((batch, 1), model.bos_id, "int32"),
            ops.full((batch, max_steps), model.pad_id, "int32"),
        ], 1)

        def next(prompt, cache, index):
            tokens = ops.take(prompt, index - 1, axis=1)[:, None]
            logits, new = model.decode_step(tokens, cache, index - 1, cache["source_mask"])
            return logits[:, 0], None, dict(new, source_mask=cache["source_mask"])

        return self.sampler(next, prompt, cache=cache, index=1), None


def run(preset="small", batch=8, source_length=14, max_extra_length=50,
        beam_size=4, rounds=3, **overrides):
    """Returns `{"cached_vs_uncached": ..., "ours_vs_keras_hub": ...,
    "ours_vs_keras_hub_bart": ...}`, each
    a dict of median seconds and ratios (see `compare`), plus the output
    length, whether the cached and uncached searches agree, and our
    sentences per second. The model is `preset` with `overrides`."""
    model = kt.Transformer.from_preset(preset, **overrides)
    vocabulary_size = model.vocabulary_size
    rng = np.random.default_rng(0)
    source = rng.integers(4, vocabulary_size, (batch, source_length)).astype("int32")
    # Every hypothesis runs to the length limit: eos is never likely enough
    # for an untrained model, so every search decodes source_length + 50 steps.
    def search(decoder):
        return CompiledSearch(decoder, lambda ids: beam_search_fn(
            decoder, ids, beam_size, 0.6, 1, max_extra_length))
    cached, uncached = search(model), search(UncachedDecoder(model))
    keras_hub_search = CompiledSearch(
        model, KerasHubBeamSearch(model, beam_size, max_extra_length))
    same = np.array_equal(keras.ops.convert_to_numpy(cached(source)[0]),
                          keras.ops.convert_to_numpy(uncached(source)[0]))
    result = {
        "backend": keras.backend.backend(),
        "output_length": source_length + max_extra_length,
        "same_output": same,
        "cached_vs_uncached": compare(cached, uncached, source, rounds),
        "ours_vs_keras_hub": compare(cached, keras_hub_search, source, rounds),
        "ours_vs_keras_hub_bart": compare(cached, KerasHubBart(
            model, beam_size, source_length + max_extra_length), source, rounds),
    }
    result["sentences_per_s"] = batch / result["cached_vs_uncached"]["a_s"]
    return result
