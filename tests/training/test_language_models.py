"""The language-model programs end to end on generated numbers and dates:
`train-lm` (with resume), `generate`, `pretrain-mlm` and `finetune`, from
the pretrained encoder and from scratch."""

import collections
import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from keras_transformer import cli
from keras_transformer.data.corpora import numbers_and_dates
from keras_transformer.data.pipeline import causal_lm_dataset
from keras_transformer.data.tokenizer import load_tokenizer, token_ids
from keras_transformer.model_files import load_model_file
from keras_transformer.training.finetune import FinetuneConfig, finetune
from keras_transformer.training.language_model_run import load_texts
from keras_transformer.training.pretrain_mlm import MaskedLMConfig, pretrain_mlm
from keras_transformer.training.train_lm import CausalLMConfig, train_lm

SMALL = dict(corpus="numbers", vocabulary_size=300, max_length=32, max_minutes=0,
             warmup_steps=50, peak_learning_rate=2e-3)


@pytest.fixture(scope="module")
def lm_run(tmp_path_factory):
    """3 epochs of gpt_tiny on the French side, then 3 more with --resume."""
    config = CausalLMConfig(**SMALL, side="target", preset="gpt_tiny", tokens_per_batch=1024,
                            epochs=3, run_dir=str(tmp_path_factory.mktemp("lm") / "run"),
                            samples=3, sample_tokens=8)
    first = train_lm(config)
    config.epochs, config.resume = 6, True
    second = train_lm(config)
    return config, first, second


@pytest.fixture(scope="module")
def mlm_run(tmp_path_factory):
    config = MaskedLMConfig(**SMALL, preset="bert_tiny", batch_size=64, epochs=3,
                            run_dir=str(tmp_path_factory.mktemp("mlm") / "run"))
    return config, pretrain_mlm(config)


def test_lm_resume_continues_at_the_right_step(lm_run):
    config, first, second = lm_run
    assert second["steps"] == 2 * first["steps"] > 0
    print(first, second)


def unigram_perplexity(train_rows, test_rows):
    """The perplexity of the test tokens (eos included) under the training
    split's token frequencies (add-one smoothed): a model that ignores
    context."""
    counts = collections.Counter(t for row in train_rows for t in row + [2])
    total, vocabulary = sum(counts.values()), 300
    log_p = [np.log((counts[t] + 1) / (total + vocabulary)) for row in test_rows
             for t in row + [2]]
    return float(np.exp(-np.mean(log_p)))


def test_lm_perplexity_is_the_exp_of_the_mean_token_loss(lm_run):
    config, _, second = lm_run
    model = load_model_file(os.path.join(config.run_dir, "model.keras"), compile=False)
    tokenizer = load_tokenizer(os.path.join(config.run_dir, "tokenizer.model"))
    train, _, test = (token_ids(tokenizer, texts) for texts in load_texts(config, "target"))
    nll, count = 0.0, 0
    for inputs, labels in causal_lm_dataset(test, 1024, config.max_length, shuffle=False):
        logits = keras.ops.convert_to_numpy(model(inputs)).astype("float64")
        log_p = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(
            -1, keepdims=True)) - logits.max(-1, keepdims=True)
        labels = labels.numpy()
        picked = np.take_along_axis(log_p, labels[..., None], -1)[..., 0]
        nll -= picked[labels > 0].sum()
        count += int((labels > 0).sum())
    assert count == sum(len(r) + 1 for r in test)  # every token and eos, no padding
    np.testing.assert_allclose(second["test_perplexity"], np.exp(nll / count), rtol=1e-4)
    baseline = unigram_perplexity(train, test)
    print(second["test_perplexity"], baseline)
    assert second["test_perplexity"] < 0.5 * baseline
