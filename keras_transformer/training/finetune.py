"""`keras-transformer finetune`: a `SequenceClassifier` on the task a
parallel corpus gives for free, from a `pretrain-mlm` run or from scratch.

The task: is the second sentence the translation of the first, against
the same source with another pair's target (`translation_pairs`)? Pairs
-> packed `[bos] source [eos] target [eos]` rows -> length-bucketed
tf.data -> `SequenceClassifier.fit` with per-epoch checkpoints ->
accuracy on the held-out test pairs -> `model.keras` + `tokenizer.model`
+ `results.json` in the run directory.
"""

import dataclasses
import os
import shutil
import time
from typing import Literal

import keras

from keras_transformer.checks import check_positive_int
from keras_transformer.data.classification import (
    classification_dataset,
    pack_pairs,
    translation_pairs,
)
from keras_transformer.data.pipeline import with_known_length
from keras_transformer.data.tokenizer import TOKENIZER_FILE, token_ids
from keras_transformer.model_files import load_model_file
from keras_transformer.models import BidirectionalEncoder, SequenceClassifier
from keras_transformer.models.presets import ENCODER_PRESETS
from keras_transformer.optimizers import transformer_adam
from keras_transformer.training.language_model_run import (
    RESUME_FIELDS,
    LanguageModelConfig,
    run_tokenizer,
    sides,
)
from keras_transformer.training.runs import (
    find_resume_point,
    fit_with_checkpoints,
    save_results,
    save_run_config,
)
from keras_transformer.training.train import load_splits


@dataclasses.dataclass
class FinetuneConfig(LanguageModelConfig):
    """`finetune`'s settings: the defaults train a translation-pair
    classifier on the shipped Bible corpus for two minutes."""

    # A `pretrain-mlm` run directory, whose encoder and tokenizer are used;
    # None trains the preset's encoder from scratch, with a new tokenizer.
    pretrained: str | None = None
    run_dir: str = "runs/bert_pairs"
    preset: Literal[tuple(ENCODER_PRESETS)] = "bert_tiny"  # from scratch only
    max_minutes: float = 2.0
    batch_size: int = 32

    def check(self):
        check_positive_int("batch_size", self.batch_size)
        if self.pretrained is not None:
            for name in ("model.keras", TOKENIZER_FILE):
                path = os.path.join(self.pretrained, name)
                if not os.path.isfile(path):
                    raise FileNotFoundError(
                        f"{path}: no such file; --pretrained takes a pretrain-mlm run directory")
        return super().check()


def build_classifier(config, vocabulary_size, jit_compile):
    """A two-class `SequenceClassifier` on the pretrained encoder, or on a
    new one of the preset, compiled with the warmup schedule."""
    if config.pretrained is not None:
        encoder = load_model_file(os.path.join(config.pretrained, "model.keras"),
                                  compile=False).encoder
    else:
        encoder = BidirectionalEncoder.from_preset(
            config.preset, **config.preset_overrides(vocabulary_size))
    model = SequenceClassifier(encoder, num_classes=2, dropout_rate=config.dropout_rate)
    model.compile(
        optimizer=transformer_adam(encoder.d_model, config.warmup_steps,
                                   peak=config.peak_learning_rate or None),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        jit_compile=jit_compile,
    )
    return model


def finetune(config):
    """Runs the program; returns a dict of results."""
    keras.utils.set_random_seed(config.seed)
    jit_compile = config.check()
    resume_from = find_resume_point(config, RESUME_FIELDS + ("batch_size",))
    splits = load_splits(config)
    print(f"corpus: {len(splits[0])} train, {len(splits[1])} valid, "
          f"{len(splits[2])} test pairs")
    save_run_config(config, resume_from)
    tokenizer_path = os.path.join(config.run_dir, TOKENIZER_FILE)
    if config.pretrained is not None and not resume_from:
        shutil.copyfile(os.path.join(config.pretrained, TOKENIZER_FILE), tokenizer_path)
    # The tokenizer pretrain-mlm trains on these texts, for a fair comparison.
    tokenizer = run_tokenizer(config, sides(splits[0], "both"),
                              resuming=bool(resume_from) or config.pretrained is not None)

    def dataset(pairs, shuffle, seed):
        firsts, seconds, labels = translation_pairs(pairs, seed)
        packed = pack_pairs(token_ids(tokenizer, firsts), token_ids(tokenizer, seconds),
                            config.max_length)
        return with_known_length(classification_dataset(
            packed, labels, config.batch_size, shuffle, config.seed))

    train_data, valid_data, test_data = (
        dataset(pairs, shuffle, config.seed + i)
        for i, (pairs, shuffle) in enumerate(zip(splits, (True, False, False))))
    start = time.monotonic()
    model = fit_with_checkpoints(
        config, resume_from,
        lambda: build_classifier(config, int(tokenizer.vocabulary_size()), jit_compile),
        train_data, valid_data, jit_compile, keep=config.keep_checkpoints)
    minutes = (time.monotonic() - start) / 60.0
    test = model.evaluate(test_data, return_dict=True, verbose=0)
    results = save_results(config, model, {
        "test_accuracy": float(test["accuracy"]), "test_examples": 2 * len(splits[2]),
        "pretrained": config.pretrained,
    }, jit_compile, minutes)
    print(f"test accuracy {results['test_accuracy']:.1%} on {results['test_examples']} "
          f"examples (half of them translations), after {minutes:.1f} minutes "
          f"({results['steps']} steps)")
    return results
