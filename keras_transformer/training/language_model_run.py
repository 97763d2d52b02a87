"""What the language-model programs (`train-lm`, `pretrain-mlm`,
`finetune`) share: their common settings, their texts, their tokenizer,
their optimizer and their training loop."""

import dataclasses
import os
import time
from typing import Literal

from keras_transformer.checks import check_choice, check_fields, check_max_length, check_rate
from keras_transformer.data.pipeline import with_known_length
from keras_transformer.data.readers import read_texts
from keras_transformer.data.tokenizer import TOKENIZER_FILE, load_tokenizer, train_tokenizer
from keras_transformer.models.presets import CAUSAL_LM_PRESETS, ENCODER_PRESETS, get_preset
from keras_transformer.training.options import (
    CorpusOptions,
    JitCompile,
    LearningRateDecay,
    OptimizerName,
    clip_norm_option,
    jit_compile_option,
    learning_rate_decay_option,
    optimizer_option,
    option,
    weight_decay_option,
)
from keras_transformer.training.runs import (
    TrainingBudget,
    decay_callbacks,
    fit_with_checkpoints,
    resolve_jit_compile,
    run_optimizer,
)
from keras_transformer.training.train import held_out_splits, load_splits

# BERT's mask piece, at id 4 in every tokenizer these programs train, so
# that a classifier trained from scratch reads the same ids as a pretrained
# one.
MASK_PIECE = "<mask>"

# What a resumed run must share with the run it continues.
RESUME_FIELDS = ("corpus", "target_path", "source_language", "target_language", "side",
                 "preset", "vocabulary_size", "max_length", "dropout_rate",
                 "optimizer", "warmup_steps", "peak_learning_rate", "learning_rate_decay",
                 "weight_decay", "clip_norm", "pretrained", "seed")

# The columns of a pair that each `side` of a parallel corpus reads, and
# the type of the configs' `side` field.
SIDES = {"source": (0,), "target": (1,), "both": (0, 1)}
Side = Literal[tuple(SIDES)]


def side_option(default):
    """The `side` field of the programs that read one side of a parallel
    corpus, or both."""
    return option(default, "which side of a parallel corpus is the text")


@dataclasses.dataclass
class LanguageModelConfig(CorpusOptions):
    """The settings every language-model program takes; each program's
    config adds its own and its defaults (a few minutes on a 2-core CPU
    with the shipped Bible corpus)."""

    corpus: str = option(
        "bible", "bible or numbers (shipped), a parallel corpus as train reads it, or "
                 "text:PATH, a file of one text a line")
    run_dir: str = option("runs/language_model", "where the tokenizer, checkpoints, logs, "
                                                 "model.keras and results.json go")
    preset: str = option("", "the model's sizes")
    vocabulary_size: int = option(2000, "pieces of the BPE vocabulary trained on the "
                                        "training split")
    max_length: int = option(128, "tokens a row, special tokens included")
    epochs: int = option(100, "passes over the training split, at most")
    max_minutes: float = option(5.0, "training time budget in minutes (0 = none)")
    max_updates: int = option(0, "stop after this many optimizer updates (0 = none)")
    optimizer: OptimizerName = optimizer_option("adam")
    warmup_steps: int = option(200, "updates of linear warmup")
    peak_learning_rate: float = option(1e-3, "the rate at the end of warmup (0 = the "
                                             "paper's formula's own peak)")
    # With the next two, as `train` has them: train-lm's test perplexity
    # 53.4 and 52.4 on seeds 0 and 1 at 1e-3 where the paper's schedule
    # alone had 58.3 and 57.7, and 33.6 where it had 44.9 at 4e-3 (seed 0,
    # docs/RESULTS.md).
    learning_rate_decay: LearningRateDecay = learning_rate_decay_option()
    weight_decay: float = weight_decay_option()
    clip_norm: float = clip_norm_option()
    dropout_rate: float | None = option(None, "dropout (default: the preset's)")
    keep_checkpoints: int = option(2, "checkpoints kept in run-dir/checkpoints")
    checkpoint_every_minutes: float = option(
        10.0, "a checkpoint every N minutes, besides one at each epoch's end (0 = off)")
    checkpoint_every_steps: int = option(0, "a checkpoint every N batches (0 = off)")
    resume: bool = option(False, "continue the run in --run-dir from its newest checkpoint")
    quiet: bool = option(False, "no progress lines")
    jit_compile: JitCompile = jit_compile_option()
    seed: int = option(0, "the weights', the data order's and dropout's seed")

    def check(self):
        """Fails on a bad setting before any work; returns `jit_compile`
        as `model.compile` takes it."""
        if self.dropout_rate is not None:
            check_rate("dropout_rate", self.dropout_rate)
        check_fields(self, positive=("vocabulary_size", "epochs", "warmup_steps",
                                     "keep_checkpoints"),
                     non_negative=("max_minutes", "max_updates", "peak_learning_rate",
                                   "weight_decay", "clip_norm",
                                   "checkpoint_every_minutes", "checkpoint_every_steps"))
        check_max_length(self.max_length)
        return resolve_jit_compile(self.jit_compile)

    def make_optimizer(self, d_model):
        """The run's optimizer, with its schedule, weight decay and
        clipping (`runs.run_optimizer`)."""
        return run_optimizer(self, d_model)

    def d_model(self):
        """The width of the model the run trains (the paper's formula's
        peak rate depends on it)."""
        return get_preset(self.preset, {**CAUSAL_LM_PRESETS, **ENCODER_PRESETS})["config"][
            "d_model"]

    def preset_overrides(self, vocabulary_size):
        """The constructor arguments that replace the preset's: the
        tokenizer's vocabulary, and `dropout_rate` if set."""
        overrides = {"vocabulary_size": vocabulary_size}
        if self.dropout_rate is not None:
            overrides["dropout_rate"] = self.dropout_rate
        return overrides


def load_texts(config, side):
    """`(train, valid, test)` lists of texts: the lines of a `text:PATH`
    corpus (shuffled with the seed, 5% and at most 1,000 held out for each
    of validation and test), or `side` ("source", "target" or "both") of
    a parallel corpus's splits."""
    if config.corpus.startswith("text:"):
        texts, report = read_texts(config.corpus[len("text:"):])
        print(report)
        return held_out_splits(config, texts, "texts")
    return tuple(sides(pairs, side) for pairs in load_splits(config))


def sides(pairs, side):
    """The sources, the targets, or ("both") the sources then the targets."""
    check_choice("side", side, SIDES)
    return [pair[i] for i in SIDES[side] for pair in pairs]


def run_tokenizer(config, texts, resuming):
    """The run's tokenizer when resuming, else SentencePiece trained on
    `texts` (with the mask piece at id 4), saved in the run directory."""
    path = os.path.join(config.run_dir, TOKENIZER_FILE)
    if resuming:
        return load_tokenizer(path)
    return train_tokenizer(texts, config.vocabulary_size, path, extra_pieces=(MASK_PIECE,))


def fit_and_test(config, resume_from, build, dataset, splits, jit_compile):
    """Trains with checkpoints and the time budget (`fit_with_checkpoints`),
    then evaluates on the test split. Each epoch's order is a function of
    the seed and the epoch's number, so a resumed run sees the batches the
    uninterrupted run saw.

    Args:
        build: a function returning the compiled model of a new run.
        dataset: a function `(split, shuffle=False, first_epoch=None)`
            returning a split's tf.data batches: one epoch, or with
            `first_epoch` the endless stream of epochs from it (the
            pipelines' argument of that name).
        splits: `(train, valid, test)`, each what `dataset` takes.

    Returns:
        `(model, minutes of training, the test metrics as a dict)`.
    """
    train, valid, test = splits
    start = time.monotonic()
    budget = TrainingBudget(config.max_minutes, config.max_updates,
                            resume_from[0] if resume_from else 0)
    model = fit_with_checkpoints(
        config, resume_from, build,
        lambda epoch: dataset(train, shuffle=True, first_epoch=epoch),
        int(with_known_length(dataset(train)).cardinality()),  # the same in any order
        with_known_length(dataset(valid)), jit_compile, keep=config.keep_checkpoints,
        budget=budget, callbacks=decay_callbacks(config, config.d_model, budget))
    minutes = (time.monotonic() - start) / 60.0
    return model, minutes, model.evaluate(with_known_length(dataset(test)),
                                          return_dict=True, verbose=0)
