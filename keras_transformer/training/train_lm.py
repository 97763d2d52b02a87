"""`keras-transformer train-lm`: a causal language model (GPT) on a CPU.

Texts -> SentencePiece -> length-bucketed tf.data -> `CausalLM.fit`
(Adam 0.9/0.98/1e-9, warmup then decay to zero at the budget) with
per-epoch checkpoints -> perplexity on the held-out test texts -> sampled
continuations -> `model.keras` + `tokenizer.model` + `results.json` in the
run directory.
"""

import dataclasses
from typing import Literal

import keras

from keras_transformer.checks import check_fields
from keras_transformer.data.pipeline import causal_lm_dataset
from keras_transformer.data.tokenizer import detokenize, token_ids
from keras_transformer.losses import LabelSmoothedCrossEntropy
from keras_transformer.metrics import MaskedAccuracy, TokenCount
from keras_transformer.models import CausalLM
from keras_transformer.models.presets import CAUSAL_LM_PRESETS
from keras_transformer.special_tokens import BOS_ID, EOS_ID
from keras_transformer.training.language_model_run import (
    RESUME_FIELDS,
    LanguageModelConfig,
    Side,
    fit_and_test,
    load_texts,
    run_tokenizer,
    side_option,
)
from keras_transformer.training.options import option
from keras_transformer.training.runs import (
    compiles_with_xla,
    find_resume_point,
    save_results,
    save_run_config,
)

PROMPT_WORDS = 3  # a sample continues the first words of a test text


@dataclasses.dataclass
class CausalLMConfig(LanguageModelConfig):
    """`train-lm`'s settings: the defaults train `gpt_mini` on the English
    side of the shipped Bible corpus for five minutes."""

    side: Side = side_option("source")
    run_dir: str = "runs/gpt_bible_en"
    preset: Literal[tuple(CAUSAL_LM_PRESETS)] = "gpt_mini"
    tokens_per_batch: int = option(4096, "tokens a batch, in batches of similar lengths")
    # Test perplexity 33.6 and 33.1 on seeds 0 and 1 in the default 5
    # minutes, against 53.4 and 52.4 at 1e-3; 8e-3 scored 32.2 on seed 0
    # (docs/RESULTS.md).
    peak_learning_rate: float = 4e-3
    samples: int = option(5, "continuations of test texts printed at the end")
    sample_tokens: int = option(32, "new tokens a continuation")
    top_k: int = option(10, "the continuations' top-k sampler")

    def check(self):
        check_fields(self, positive=("tokens_per_batch", "sample_tokens", "top_k"),
                     non_negative=("samples",))
        return super().check()


def build_causal_lm(config, vocabulary_size, jit_compile):
    """The preset's `CausalLM`, compiled with the run's optimizer, the
    cross-entropy of real tokens, perplexity and next-token accuracy."""
    import keras_hub  # its Perplexity: exp(mean cross-entropy) over all tokens seen

    model = CausalLM.from_preset(config.preset, **config.preset_overrides(vocabulary_size))
    model.compile(
        optimizer=config.make_optimizer(model.d_model),
        loss=LabelSmoothedCrossEntropy(epsilon=0.0),
        metrics=[keras_hub.metrics.Perplexity(from_logits=True, mask_token_id=0),
                 MaskedAccuracy(), TokenCount()],
        jit_compile=jit_compile,
    )
    return model


def continue_texts(model, tokenizer, prompts, new_tokens=32, top_k=10, seed=0):
    """Each prompt text continued by up to `new_tokens` tokens, drawn from
    the `top_k` likeliest (keras-hub's `TopKSampler`); returns the texts,
    prompts included."""
    import keras_hub

    rows = [[BOS_ID] + ids for ids in token_ids(tokenizer, prompts)]
    length = min(model.max_length, max(map(len, rows)) + new_tokens)
    rows = [row[: length - 1] for row in rows]
    sampler = keras_hub.samplers.TopKSampler(k=top_k, seed=seed)
    output = model.generate(rows, max_length=length, sampler=sampler)
    texts = []
    for row in output:
        ids = [int(t) for t in row[1:]]  # without bos
        texts.append(ids[: ids.index(EOS_ID)] if EOS_ID in ids else ids)
    return detokenize(tokenizer, [[t for t in ids if t] for ids in texts])


def train_lm(config):
    """Runs the program; returns a dict of results."""
    keras.utils.set_random_seed(config.seed)
    jit_compile = config.check()
    resume_from = find_resume_point(config, RESUME_FIELDS)
    train_texts, valid_texts, test_texts = load_texts(config, config.side)
    print(f"corpus: {len(train_texts)} train, {len(valid_texts)} valid, "
          f"{len(test_texts)} test texts")
    save_run_config(config, resume_from)
    tokenizer = run_tokenizer(config, train_texts, bool(resume_from))
    vocabulary_size = int(tokenizer.vocabulary_size())
    static_shapes = compiles_with_xla(jit_compile)

    def dataset(rows, shuffle=False, first_epoch=None):
        return causal_lm_dataset(rows, config.tokens_per_batch, config.max_length,
                                 shuffle, config.seed, static_shapes, first_epoch)

    model, minutes, test = fit_and_test(
        config, resume_from, lambda: build_causal_lm(config, vocabulary_size, jit_compile),
        dataset, [token_ids(tokenizer, t) for t in (train_texts, valid_texts, test_texts)],
        jit_compile)
    prompts = [" ".join(t.split()[:PROMPT_WORDS]) for t in test_texts[: config.samples]]
    samples = continue_texts(model, tokenizer, prompts, config.sample_tokens, config.top_k,
                             config.seed) if prompts else []
    results = save_results(config, model, {
        "test_perplexity": float(test["perplexity"]),
        "test_next_token_accuracy": float(test["masked_accuracy"]),
        "test_texts": len(test_texts),
        "samples": [{"prompt": p, "continuation": s} for p, s in zip(prompts, samples)],
    }, jit_compile, minutes)
    print(f"test perplexity {results['test_perplexity']:.2f}, next-token accuracy "
          f"{results['test_next_token_accuracy']:.1%} on {len(test_texts)} texts, "
          f"after {minutes:.1f} minutes ({results['steps']} steps)")
    for sample in results["samples"]:
        print(f"  {sample['prompt']!r} -> {sample['continuation']}")
    return results
