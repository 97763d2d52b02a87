"""`keras-transformer pretrain-mlm`: BERT's masked language modelling.

Texts -> SentencePiece with a mask piece -> dynamically masked,
length-bucketed tf.data -> `MaskedLM.fit` (Adam, warmup then decay) with
per-epoch checkpoints -> masked-token accuracy on the held-out test texts
-> `model.keras` + `tokenizer.model` + `results.json` in the run
directory; `finetune --pretrained RUN_DIR` continues from there.
"""

import dataclasses
import warnings
from typing import Literal

import keras

from keras_transformer.checks import check_positive_int, check_rate
from keras_transformer.data.masking import masked_lm_dataset
from keras_transformer.data.tokenizer import token_ids
from keras_transformer.losses import LabelSmoothedCrossEntropy
from keras_transformer.metrics import MaskedAccuracy
from keras_transformer.models import MaskedLM
from keras_transformer.models.presets import ENCODER_PRESETS
from keras_transformer.training.language_model_run import (
    MASK_PIECE,
    RESUME_FIELDS,
    LanguageModelConfig,
    Side,
    fit_and_test,
    load_texts,
    run_tokenizer,
    side_option,
)
from keras_transformer.training.options import option
from keras_transformer.training.runs import find_resume_point, save_results, save_run_config


@dataclasses.dataclass
class MaskedLMConfig(LanguageModelConfig):
    """`pretrain-mlm`'s settings: the defaults pretrain `bert_tiny` on
    both sides of the shipped Bible corpus for five minutes (`bert_mini`
    got 299 steps there and learned no more than token frequencies:
    docs/RESULTS.md)."""

    side: Side = side_option("both")
    run_dir: str = "runs/bert_bible"
    preset: Literal[tuple(ENCODER_PRESETS)] = "bert_tiny"
    batch_size: int = option(64, "texts a batch")
    mask_rate: float = option(0.15, "share of tokens chosen for prediction (BERT's)")
    # Masked-token accuracy 19.4% in the default 5 minutes, against 18.6%
    # at 2e-3 and 17.3% at 1e-3 (seed 0, docs/RESULTS.md).
    peak_learning_rate: float = 4e-3

    def check(self):
        check_positive_int("batch_size", self.batch_size)
        check_rate("mask_rate", self.mask_rate, zero=False)
        return super().check()


def build_masked_lm(config, vocabulary_size, jit_compile):
    """The preset's `MaskedLM`, compiled with the run's optimizer, the
    cross-entropy of the masked tokens and their accuracy (empty
    prediction slots have label 0, which both ignore)."""
    model = MaskedLM.from_preset(config.preset, **config.preset_overrides(vocabulary_size))
    # BERT trained the pooler with next-sentence prediction, which this
    # objective leaves out: its weights get no gradient, as expected.
    warnings.filterwarnings("ignore", "Gradients do not exist for variables .'pooler/")
    model.compile(
        optimizer=config.make_optimizer(model.encoder.d_model),
        loss=LabelSmoothedCrossEntropy(epsilon=0.0),
        metrics=[MaskedAccuracy()],
        jit_compile=jit_compile,
    )
    return model


def pretrain_mlm(config):
    """Runs the program; returns a dict of results."""
    keras.utils.set_random_seed(config.seed)
    jit_compile = config.check()
    resume_from = find_resume_point(config, RESUME_FIELDS + ("mask_rate",))
    train_texts, valid_texts, test_texts = load_texts(config, config.side)
    print(f"corpus: {len(train_texts)} train, {len(valid_texts)} valid, "
          f"{len(test_texts)} test texts")
    save_run_config(config, resume_from)
    tokenizer = run_tokenizer(config, train_texts, bool(resume_from))
    vocabulary_size = int(tokenizer.vocabulary_size())
    mask_id = int(tokenizer.token_to_id(MASK_PIECE))

    def dataset(rows, shuffle=False, first_epoch=None):
        # Unshuffled held-out texts are masked the same way every time.
        return masked_lm_dataset(rows, mask_id, vocabulary_size, config.batch_size,
                                 config.max_length, config.mask_rate, config.seed, shuffle,
                                 first_epoch)

    model, minutes, test = fit_and_test(
        config, resume_from, lambda: build_masked_lm(config, vocabulary_size, jit_compile),
        dataset, [token_ids(tokenizer, t) for t in (train_texts, valid_texts, test_texts)],
        jit_compile)
    results = save_results(config, model, {
        "test_masked_accuracy": float(test["masked_accuracy"]),
        "test_loss": float(test["loss"]), "test_texts": len(test_texts),
    }, jit_compile, minutes)
    print(f"test masked-token accuracy {results['test_masked_accuracy']:.1%} "
          f"(loss {results['test_loss']:.3f}) on {len(test_texts)} texts, after "
          f"{minutes:.1f} minutes ({results['steps']} steps)")
    return results
