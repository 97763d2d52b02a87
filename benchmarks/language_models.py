"""GPT and BERT side by side with keras-hub's, on the same backend.

- Training step: our `CausalLM` against keras-hub's `GPT2CausalLM`, and
  our `MaskedLM` against keras-hub's `BertMaskedLM`, each pair with the
  same sizes and batches, each with the loss and Adam its package trains
  with: ours `LabelSmoothedCrossEntropy(0)` and `kt.optimizers.Adam` (as
  `train-lm` and `pretrain-mlm` compile them), keras-hub's Keras'
  `SparseCategoricalCrossentropy` (padding ignored) and Keras's Adam; the
  steps are timed inside `fit` (`benchmarks.timing.fit_steps`).
- Generation: `CausalLM.generate` against `GPT2CausalLM.generate`, the same
  greedy sampler, prompts and output length, no stop token, so both run
  every step.

The reference sizes are the `gpt_mini` / `bert_mini` presets' (4 layers,
d_model 128 / 256); batches of 16 x 128 tokens. The models are sized
alike but not equal: ours are post-norm GPT (keras-hub's GPT-2 is pre-norm
with a final LayerNorm), which costs the same FLOPs. Training runs on the
path Keras and `train-lm` take by default (`jit_compile="auto"`: graph mode
on a CPU-only TensorFlow), or as `jit_compile` says.
"""

import keras
import numpy as np

import keras_transformer as kt
from keras_transformer.models import CAUSAL_LM_PRESETS, ENCODER_PRESETS
from keras_transformer.training.runs import resolve_jit_compile

from benchmarks.timing import compare, fit_steps
from benchmarks.training import ADAM, keras_hub_loss


def _sizes(presets, name, **overrides):
    c = {**presets[name]["config"], **overrides}
    return {k: c[k] for k in ("vocabulary_size", "num_layers", "d_model", "num_heads",
                              "d_ff", "max_length")}


def _token_batches(count, batch, length, vocabulary_size, seed=0):
    """Rows of random tokens and random lengths in `[length // 2, length]`,
    padded with 0."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(4, vocabulary_size, (count, batch, length)).astype("int32")
    lengths = rng.integers(length // 2, length + 1, (count, batch, 1))
    return np.where(np.arange(length) < lengths, ids, 0).astype("int32")


def _compile(model, jit_compile):
    ours = isinstance(model, (kt.CausalLM, kt.MaskedLM))
    model.compile(
        optimizer=(kt.optimizers.Adam if ours else keras.optimizers.Adam)(**ADAM),
        loss=kt.LabelSmoothedCrossEntropy(0.0) if ours else keras_hub_loss(),
        jit_compile=jit_compile,
    )
    return model


def _trainer(model, inputs_of):
    """Trains on the token batches in one `fit` call; `(seconds, loss)` as
    `fit_steps`."""
    return lambda batches: fit_steps(model, [inputs_of(ids) for ids in batches])


def _hub_sizes(sizes):
    """Our sizes as keras-hub's backbones name them."""
    return dict(vocabulary_size=sizes["vocabulary_size"], num_layers=sizes["num_layers"],
                num_heads=sizes["num_heads"], hidden_dim=sizes["d_model"],
                intermediate_dim=sizes["d_ff"], max_sequence_length=sizes["max_length"])


def _gpt2(sizes):
    import keras_hub

    return keras_hub.models.GPT2Backbone(**_hub_sizes(sizes))


def causal_lm_training(sizes, batches, rounds, jit_compile):
    import keras_hub

    ours = _compile(kt.CausalLM(**sizes), jit_compile)
    theirs = _compile(keras_hub.models.GPT2CausalLM(_gpt2(sizes), preprocessor=None),
                      jit_compile)

    def our_inputs(ids):  # predict token t + 1 from tokens <= t
        return {"token_ids": ids[:, :-1]}, ids[:, 1:]

    def their_inputs(ids):
        return {"token_ids": ids[:, :-1], "padding_mask": ids[:, :-1] != 0}, ids[:, 1:]

    timing = compare(_trainer(ours, our_inputs), _trainer(theirs, their_inputs), batches,
                     rounds, self_timed=True)
    return timing, [ours.count_params(), theirs.count_params()]


def masked_lm_training(sizes, batches, rounds, jit_compile, seed=0):
    import keras_hub

    ours = _compile(kt.MaskedLM(kt.BidirectionalEncoder(**sizes)), jit_compile)
    backbone = keras_hub.models.BertBackbone(**_hub_sizes(sizes))
    theirs = _compile(keras_hub.models.BertMaskedLM(backbone, preprocessor=None), jit_compile)
    # 15% of the positions, inside every row's real tokens, the same for
    # both sides and every batch (the masking itself is not timed).
    batch, length = batches.shape[1:]
    rng = np.random.default_rng(seed)
    positions = np.sort(rng.integers(1, length // 2, (batch, max(1, round(0.15 * length)))),
                        -1).astype("int32")

    def inputs_of(ids, padding_mask):
        inputs = {"token_ids": ids, "segment_ids": np.zeros_like(ids),
                  "mask_positions": positions}
        if padding_mask:
            inputs["padding_mask"] = ids != 0
        return inputs, np.take_along_axis(ids, positions, 1)

    timing = compare(_trainer(ours, lambda ids: inputs_of(ids, False)),
                     _trainer(theirs, lambda ids: inputs_of(ids, True)), batches, rounds,
                     self_timed=True)
    return timing, [ours.count_params(), theirs.count_params()]


def generation(sizes, batch, prompt_length, max_length, rounds):
    import keras_hub

    ours = kt.CausalLM(**sizes)
    theirs = keras_hub.models.GPT2CausalLM(_gpt2(sizes), preprocessor=None)
    theirs.compile(sampler="greedy")
    rng = np.random.default_rng(2)
    lengths = rng.integers(prompt_length // 2, prompt_length + 1, (batch, 1))
    prompts = rng.integers(4, sizes["vocabulary_size"], (batch, max_length))
    prompts = np.where(np.arange(max_length) < lengths, prompts, 0).astype("int32")

    def our_generate(_):
        return ours.generate(prompts, max_length, "greedy", stop_token_ids=None)

    def their_generate(_):
        return theirs.generate({"token_ids": prompts, "padding_mask": prompts != 0},
                               stop_token_ids=None)["token_ids"]

    return compare(our_generate, their_generate, None, rounds)


def run(rounds=3, steps=5, batch=16, length=128, generate_batch=8, prompt_length=16,
        max_length=128, lm_preset="gpt_mini", encoder_preset="bert_mini", jit_compile="auto",
        **overrides):
    """Both training comparisons and the generation one; see the module
    docstring. Returns the `compare` results and parameter counts."""
    jit = resolve_jit_compile(jit_compile)
    gpt = _sizes(CAUSAL_LM_PRESETS, lm_preset, **overrides)
    bert = _sizes(ENCODER_PRESETS, encoder_preset, **overrides)
    results = {"batch": batch, "length": length, "steps": steps, "jit_compile": jit,
               "generate_batch": generate_batch, "generate_length": max_length}
    # `steps` timed steps inside one `fit` call, after an untimed first.
    batches = _token_batches(steps + 1, batch, length, gpt["vocabulary_size"])
    results["causal_lm"], results["causal_lm_parameters"] = causal_lm_training(
        gpt, batches, rounds, jit)
    batches = _token_batches(steps + 1, batch, length, bert["vocabulary_size"], seed=1)
    results["masked_lm"], results["masked_lm_parameters"] = masked_lm_training(
        bert, batches, rounds, jit)
    results["generate"] = generation(gpt, generate_batch, prompt_length, max_length, rounds)
    return results
