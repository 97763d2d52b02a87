"""Config fields that are also command-line flags: each carries the line
`--help` prints for it, and optionally a check of its value."""

import dataclasses
from typing import Literal

from keras_transformer.data.tokenizer import DEFAULT_SUBWORD_MODEL, SUBWORD_MODELS
from keras_transformer.optimizers import transformer_adam, transformer_muon

# `jit_compile` as the programs and benchmarks take it: XLA on, off, or
# "auto" (`runs.resolve_jit_compile`).
JitCompile = Literal["auto"] | bool
SubwordModel = Literal[SUBWORD_MODELS]
LearningRateDecay = Literal["linear", "paper"]
# What a run's `optimizer` names (`runs.run_optimizer`).
OPTIMIZERS = {"adam": transformer_adam, "muon": transformer_muon}
OptimizerName = Literal[tuple(OPTIMIZERS)]


def option(default, help, check=None):
    """A dataclass field with `default`, the flag's `help` line and a
    `check(value)` that the parsed value must pass (it raises ValueError)."""
    metadata = {"help": help}
    if check is not None:
        metadata["check"] = check
    return dataclasses.field(default=default, metadata=metadata)


def jit_compile_option():
    """The `jit_compile` field of a program that trains."""
    return option("auto", "XLA; auto: on JAX, and on TensorFlow with a GPU or TPU")


def learning_rate_decay_option():
    """The `learning_rate_decay` field of a program that trains
    (`runs.decays`)."""
    return option("linear", "after warmup, linear: down to zero at the end of the time or "
                            "update budget (the paper's without one); paper: the inverse "
                            "square root")


def optimizer_option(default):
    """The `optimizer` field of a program that trains (`runs.run_optimizer`)."""
    return option(default, "adam: the paper's Adam; muon: Muon's orthogonalised momentum for "
                           "the hidden layers' matrices, that Adam for the rest (not in the "
                           "paper)")


def weight_decay_option():
    """The `weight_decay` field of a program that trains: not in the
    paper, a regulariser that costs no step time."""
    return option(0.1, "decoupled weight decay (AdamW's): each update also takes learning "
                       "rate x weight_decay of every weight off it (0 = none, the paper's)")


def clip_norm_option():
    """The `clip_norm` field of a program that trains: not in the paper."""
    return option(1.0, "scale the gradient of an update down to this global L2 norm when "
                       "it is larger (0 = off, the paper's)")


def subword_model_option():
    """The `subword_model` field of a program that trains a translation
    tokenizer."""
    return option(DEFAULT_SUBWORD_MODEL, "SentencePiece's model: bpe (byte-pair encoding) or "
                                         "unigram (a unigram language model over pieces)")


def field_help(config_class, name):
    """The help line of field `name`: its own, else that of the nearest
    base class that declares it (a subclass that only changes a default
    keeps the base's line)."""
    for cls in config_class.__mro__:
        field = getattr(cls, "__dataclass_fields__", {}).get(name)
        if field is not None and "help" in field.metadata:
            return field.metadata["help"]
    raise ValueError(f"{config_class.__name__}.{name} has no help line; declare it "
                     "with training.options.option(default, help)")


@dataclasses.dataclass
class CorpusOptions:
    """The fields that name a parallel corpus, shared by the programs that
    read one; each program declares `corpus` again with its own line."""

    corpus: str = option("bible", "bible or numbers (shipped), or a corpus file")
    target_path: str | None = option(None, "the target side's file when --corpus is a Moses "
                                           "source file")
    source_language: str = option("en", "the source's language code: Moses file suffix, "
                                        "JSONL key, shipped corpus side")
    target_language: str = option("fr", "the target's language code, as --source-language")
