"""`keras-transformer train`: the paper's recipe, end to end, on a CPU.

Corpus -> shared SentencePiece vocabulary -> length-bucketed tf.data ->
`Transformer.fit` (warmup, then the paper's decay or a linear one to zero
at the time budget; Adam 0.9/0.98/1e-9, label smoothing, residual
dropout) with atomic checkpoints and TensorBoard logs ->
averaging of the last checkpoints -> the length penalty's alpha chosen on
the validation split -> BLEU and chrF (sacrebleu) with beam search on the
test split -> `model.keras` + `tokenizer.model` + `translator.json` in the
run directory.
"""

import dataclasses
import filecmp
import json
import os
import random
import resource
import shutil
import time
from typing import Literal

import keras

from keras_transformer.bleu import detokenized_bleu, tokenized_bleu
from keras_transformer.checks import (
    check_fields, check_max_length, check_non_negative, check_rate)
from keras_transformer.compilation_cache import enable_compilation_cache
from keras_transformer.data.corpora import held_out_count, shipped_splits
from keras_transformer.data.pipeline import (
    batch_statistics,
    count_batches,
    make_dataset,
    prepared_dataset,
    with_known_length,
)
from keras_transformer.data.prepared import HELD_OUT_FILES, is_prepared, read_manifest
from keras_transformer.data.readers import read_corpus
from keras_transformer.data.tokenizer import (
    DEFAULT_VOCABULARY_SIZE, TOKENIZER_FILE, load_tokenizer, train_tokenizer)
from keras_transformer.distribution import Parallelism, parse_distribution
from keras_transformer.losses import LabelSmoothedCrossEntropy
from keras_transformer.metrics import MaskedAccuracy, TokenCount
from keras_transformer.models import PRESETS, Transformer
from keras_transformer.models.presets import get_preset
from keras_transformer.progress import Progress
from keras_transformer.training.budget_dropout import RATES as DROPOUT_RATES, BudgetDropout
from keras_transformer.training.checkpoints import average_checkpoints, list_checkpoints
from keras_transformer.training.options import (
    CorpusOptions,
    JitCompile,
    LearningRateDecay,
    OptimizerName,
    SubwordModel,
    clip_norm_option,
    jit_compile_option,
    learning_rate_decay_option,
    optimizer_option,
    option,
    subword_model_option,
    weight_decay_option,
)
from keras_transformer.training.runs import (
    TrainingBudget,
    compiles_with_xla,
    decay_callbacks,
    find_resume_point,
    fit_with_checkpoints,
    resolve_jit_compile,
    run_optimizer,
    save_run_config,
)
from keras_transformer.translator import Translator

# Section 6.1: beam size and alpha "were chosen after experimentation on the
# development set". `alpha="auto"` does the same on the validation split.
ALPHA_CANDIDATES = (0.6, 0.8, 1.0, 1.2, 1.4)
ALPHA_SENTENCES = 500  # validation sentences that choose alpha


# Each optimizer's batch and peak rate, the best measured in the demo's 10
# minutes (docs/RESULTS.md). Muon's update costs as much at any batch
# size, so it takes larger batches than Adam, and a higher rate with them.
OPTIMIZER_DEFAULTS = {
    "adam": {"tokens_per_batch": 512, "peak_learning_rate": 4e-3},
    "muon": {"tokens_per_batch": 1024, "peak_learning_rate": 6e-3},
}


def _optimizer_defaults_help(name):
    return ", ".join(f"{defaults[name]:g} with {optimizer}"
                     for optimizer, defaults in OPTIMIZER_DEFAULTS.items())


@dataclasses.dataclass
class TrainConfig(CorpusOptions):
    """Everything `train` needs; the defaults train the `mini` preset on
    the shipped Bible corpus for ten minutes on a 2-core CPU. The command
    line's flags are generated from these fields, their types and their
    help lines. The figures behind each default are in docs/RESULTS.md."""

    corpus: str = option(
        "bible", "bible or numbers (shipped), a TSV, JSONL or Moses file, tfds:NAME:SPLIT, "
        "or a directory written by prepare (streamed, for large corpora)")
    run_dir: str = option("runs/bible_en_fr", "where the tokenizer, checkpoints, logs, "
                                              "model.keras and results.json go")
    # mini: the best in 10 minutes of the CPU presets.
    preset: Literal[tuple(PRESETS)] = option(
        "mini", "the model's sizes: " + ", ".join(PRESETS)
                + " (tiny to small for a CPU; the rest Table 3's rows)")
    vocabulary_size: int | None = option(
        None, f"pieces of the shared vocabulary (default: {DEFAULT_VOCABULARY_SIZE}, "
              "or a prepared corpus's own)")
    subword_model: SubwordModel = subword_model_option()
    # The paper's 25,000 scaled to a CPU; None: the optimizer's own
    # (`OPTIMIZER_DEFAULTS`).
    tokens_per_batch: int | None = option(
        None, "source and target tokens a batch, in batches of similar lengths (default: "
              + _optimizer_defaults_help("tokens_per_batch") + ")")
    gradient_accumulation_steps: int = option(
        1, "batches whose mean gradient makes one update (the warmup counts updates)")
    dtype_policy: Literal["float32", "mixed_bfloat16", "mixed_float16"] = option(
        "float32", "compute in 16 bits with float32 weights (float16 with loss scaling)")
    max_length: int = option(128, "tokens a side, bos and eos included")
    long_pairs: Literal["drop", "truncate"] = option(
        "drop", "what happens to a pair longer than --max-length")
    epochs: int = option(40, "passes over the training split, at most")
    max_minutes: float = option(10.0, "training time budget in minutes (0 = none)")
    max_updates: int = option(0, "stop after this many optimizer updates (0 = none)")
    # 1.2-3.6 BLEU more than Adam in the demo's 10 minutes on every seed, in
    # about 20% fewer updates (docs/RESULTS.md).
    optimizer: OptimizerName = optimizer_option("muon")
    # 800 against 200: 0.9-1.1 BLEU more in the demo's 10 minutes on two
    # seeds, and more at equal updates (docs/RESULTS.md).
    warmup_steps: int = option(800, "updates of linear warmup (the paper: 4000 in 100K)")
    # The paper's formula peaks where small models stall; None: the
    # optimizer's own (`OPTIMIZER_DEFAULTS`).
    peak_learning_rate: float | None = option(
        None, "the rate at the end of warmup (default: "
              + _optimizer_defaults_help("peak_learning_rate")
              + "; 0 = the paper's formula's own peak)")
    learning_rate_decay: LearningRateDecay = learning_rate_decay_option()
    label_smoothing: float | None = option(
        None, "epsilon_ls (default: the preset's: 0.1; 0 and 0.2 for rows D3 and D4)")
    # 1.0-1.5 BLEU more in the demo's 10 minutes on every seed (docs/RESULTS.md).
    weight_decay: float = weight_decay_option()
    # 0.7 BLEU more in the demo's 10 minutes on average over three seeds,
    # one of them 0.4 less (docs/RESULTS.md).
    clip_norm: float = clip_norm_option()
    dropout_rate: Literal["auto"] | float | None = option(
        "auto", "residual dropout; auto: none for 2 epochs, then by the epochs the budget "
                "holds, " + ", ".join(f"{rate:g} from {least:g}" for least, rate in DROPOUT_RATES)
                + "; or a rate")
    keep_checkpoints: int = option(5, "checkpoints kept in run-dir/checkpoints")
    checkpoint_every_minutes: float = option(
        10.0, "a checkpoint every N minutes, besides one at each epoch's end (0 = off)")
    checkpoint_every_steps: int = option(0, "a checkpoint every N batches (0 = off)")
    # The paper averages the last 5 checkpoints of a converged model; a
    # 10-minute run is still learning fast and loses BLEU by it.
    average_last: int = option(1, "average the last N checkpoints into model.keras "
                                  "(0 or 1 = off)")
    # It gains a short run more than averaging checkpoints.
    ema_momentum: float = option(0.99, "momentum of the moving average of the weights "
                                       "that model.keras holds (0 = the last weights)")
    beam_size: int = option(4, "beams of the search that translates the test split")
    # Section 6.1 tuned alpha on the development set.
    alpha: Literal["auto"] | float = option(
        "auto", "length penalty; auto: the best of "
                + ", ".join(f"{a:g}" for a in ALPHA_CANDIDATES)
                + f" on {ALPHA_SENTENCES} validation sentences; or a number >= 0")
    eval_sentences: int = option(1000, "test sentences scored with BLEU and chrF (0 = all)")
    tokenized_bleu: bool = option(
        False, "also BLEU on Moses tokens with compounds split, as the paper reports it "
               "(not comparable with sacrebleu's)")
    resume: bool = option(False, "continue the run in --run-dir from its newest checkpoint")
    quiet: bool = option(False, "no progress lines")
    jit_compile: JitCompile = jit_compile_option()
    distribution: str = option(
        "none", "none, data, or model:K (K-way model parallelism); --tokens-per-batch is "
                "split over the data-parallel replicas", check=parse_distribution)
    seed: int = option(0, "the weights', the data order's and dropout's seed")

    def __post_init__(self):
        """Gives the fields left None their values for `optimizer`."""
        for name, value in OPTIMIZER_DEFAULTS.get(self.optimizer, {}).items():
            if getattr(self, name) is None:
                setattr(self, name, value)


# The paper's training and decoding on WMT 2014 EN-DE (sections 5-6.1), as
# `TrainConfig` fields; the command line's `--recipe NAME` starts from one,
# and the flags given beside it win. The 25,000 tokens of an update come
# from 4 batches of 6,250, which fit one GPU; on several, use the devices
# instead (`--distribution data --tokens-per-batch 25000
# --gradient-accumulation-steps 1`).
_PAPER = dict(
    source_language="en", target_language="de", vocabulary_size=37000, subword_model="bpe",
    tokens_per_batch=6250, gradient_accumulation_steps=4, max_length=256,
    epochs=1000, max_minutes=0.0, warmup_steps=4000, peak_learning_rate=0.0,
    optimizer="adam", learning_rate_decay="paper", weight_decay=0.0, clip_norm=0.0,
    dropout_rate=None,
    ema_momentum=0.0, checkpoint_every_minutes=10.0,
    beam_size=4, alpha=0.6, eval_sentences=0, tokenized_bleu=True)
RECIPES = {
    "paper-base": dict(_PAPER, preset="base", run_dir="runs/paper_base", max_updates=100_000,
                       keep_checkpoints=5, average_last=5),
    "paper-big": dict(_PAPER, preset="big", run_dir="runs/paper_big", max_updates=300_000,
                      keep_checkpoints=20, average_last=20),
}


def load_splits(config):
    """`(train, valid, test)` lists of sentence pairs for `config.corpus`."""
    shipped = shipped_splits(config.corpus, config.target_language)
    if shipped:
        return shipped
    pairs, report = read_corpus(
        config.corpus, config.target_path, config.source_language,
        config.target_language,
    )
    print(report)
    return held_out_splits(config, pairs, "usable pairs")


def held_out_splits(config, items, what):
    """`(train, valid, test)` from a user's corpus: `items` shuffled with
    the seed, then `held_out_count` held out for each of validation and
    test."""
    held_out = held_out_count(config.corpus, len(items), what)
    items = list(items)
    random.Random(config.seed).shuffle(items)
    return items[2 * held_out:], items[:held_out], items[held_out:2 * held_out]


def label_smoothing(config):
    """`config.label_smoothing`, else the preset's `epsilon_ls` (Table 3's
    rows D3 and D4 vary it)."""
    if config.label_smoothing is not None:
        return config.label_smoothing
    return PRESETS[config.preset]["epsilon_ls"]


def build_model(config, vocabulary_size, jit_compile):
    overrides = {"vocabulary_size": vocabulary_size, "max_length": max(
        config.max_length, PRESETS[config.preset]["config"]["max_length"])}
    if config.dropout_rate is not None:  # "auto" starts without (BudgetDropout)
        overrides["dropout_rate"] = 0.0 if config.dropout_rate == "auto" else config.dropout_rate
    model = Transformer.from_preset(config.preset, dtype=config.dtype_policy, **overrides)
    optimizer = run_optimizer(config, model.d_model,
                              gradient_accumulation_steps=config.gradient_accumulation_steps,
                              use_ema=config.ema_momentum > 0,
                              ema_momentum=config.ema_momentum)
    if config.dtype_policy == "mixed_float16":  # float16 needs its loss scaled
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    model.compile(
        optimizer=optimizer,
        loss=LabelSmoothedCrossEntropy(epsilon=label_smoothing(config)),
        metrics=[MaskedAccuracy(), TokenCount()],
        jit_compile=jit_compile,
    )
    return model


def evaluate_bleu(translator, pairs, tokenized_language=None, quiet=True):
    """Corpus BLEU (sacrebleu's, with its signature) and chrF of
    `translator` on `pairs`; with `tokenized_language`, also the paper's
    tokenized BLEU (`keras_transformer.bleu`). Reports progress unless
    `quiet`."""
    import sacrebleu

    sources = [s for s, _ in pairs]
    references = [t for _, t in pairs]
    progress = Progress(len(sources), "sentences", quiet=quiet)
    hypotheses = translator.translate(sources, progress)
    progress.close()
    bleu = detokenized_bleu(hypotheses, references)
    scores = {"bleu": bleu["score"], "bleu_signature": bleu["signature"],
              "chrf": sacrebleu.corpus_chrf(hypotheses, [references]).score,
              "samples": list(zip(sources, hypotheses, references))[:5]}
    if tokenized_language:
        tokenized = tokenized_bleu(hypotheses, references, tokenized_language)
        scores |= {"tokenized_bleu": tokenized["score"],
                   "tokenized_bleu_method": tokenized["method"]}
    return scores


def choose_alpha(translator, pairs, candidates=ALPHA_CANDIDATES, quiet=True):
    """Sets `translator.alpha` to the candidate whose translations of
    `pairs` score the best corpus BLEU (the first on a tie); returns
    `{alpha: BLEU}`."""
    bleu = {}
    for alpha in candidates:
        translator.alpha = alpha
        bleu[alpha] = evaluate_bleu(translator, pairs, quiet=quiet)["bleu"]
    translator.alpha = max(bleu, key=bleu.get)
    return bleu


def train(config):
    """Runs the training program; returns a dict of results."""
    program_start = time.monotonic()
    keras.utils.set_random_seed(config.seed)
    parallelism, jit_compile = check_config(config)
    cache_dir = enable_compilation_cache()
    if cache_dir:
        print(f"compiled XLA programs are cached in {cache_dir}")
    checkpoint_dir = os.path.join(config.run_dir, "checkpoints")
    resume_from = find_resume_point(config, RESUME_FIELDS)  # (batches, path) or None
    prepared = _prepared_manifest(config)
    if prepared:  # training pairs streamed from its shards
        train_pairs, valid_pairs, test_pairs = None, *(
            read_corpus(os.path.join(config.corpus, HELD_OUT_FILES[split]))[0]
            for split in ("valid", "test"))
    else:
        train_pairs, valid_pairs, test_pairs = load_splits(config)
    print(f"corpus: {prepared['pairs']['train'] if prepared else len(train_pairs)} train"
          f"{' (prepared)' if prepared else ''}, {len(valid_pairs)} valid, "
          f"{len(test_pairs)} test pairs")
    tokenizer = _tokenizer(config, train_pairs, bool(resume_from))
    save_run_config(config, resume_from)  # once the input is known good

    # XLA compiles every new shape: give it one per length bucket.
    static_shapes = compiles_with_xla(jit_compile)

    def dataset(pairs, shuffle=False, **stream):
        settings = dict(
            tokens_per_batch=config.tokens_per_batch, max_length=config.max_length,
            long_pairs=config.long_pairs, shuffle=shuffle, seed=config.seed,
            static_shapes=static_shapes, batch_multiple=parallelism.data_parallel_size,
            **stream)
        if pairs is None:  # the prepared corpus's training pairs
            return prepared_dataset(config.corpus, **settings)
        return make_dataset(pairs, tokenizer, **settings)

    if prepared:  # counted from the manifest's lengths: the first step waits for no pass
        batches, kept = count_batches(
            prepared["lengths"], config.tokens_per_batch, config.max_length,
            config.long_pairs, static_shapes, parallelism.data_parallel_size)
        efficiency = None
        print(f"{batches} batches an epoch; {prepared['pairs']['train'] - kept} pairs "
              f"longer than max_length={config.max_length} dropped")
    else:  # one pass counts an epoch's batches, the same in every shuffled order
        stats = batch_statistics(dataset(train_pairs))
        batches, efficiency = stats["batches"], stats["padding_efficiency"]
        print(f"{batches} batches an epoch; padding efficiency (real "
              f"tokens / batch slots): {efficiency:.1%}")

    start = time.monotonic()
    budget = TrainingBudget(
        config.max_minutes, config.max_updates * config.gradient_accumulation_steps,
        resume_from[0] if resume_from else 0)
    model = fit_with_checkpoints(
        config, resume_from,
        lambda: build_model(config, int(tokenizer.vocabulary_size()), jit_compile),
        lambda epoch: dataset(train_pairs, shuffle=True, repeat=True, first_epoch=epoch),
        batches, with_known_length(dataset(valid_pairs)), jit_compile,
        keep=max(config.keep_checkpoints, config.average_last), budget=budget,
        scope=parallelism.scope(), callbacks=decay_callbacks(
            config, lambda: get_preset(config.preset)["config"]["d_model"], budget,
            config.gradient_accumulation_steps) + (
            [BudgetDropout(budget, batches, config.epochs)]
            if config.dropout_rate == "auto" else []))
    minutes = (time.monotonic() - start) / 60.0
    dropout_rate = model.dropout_rate  # the rate it ended with
    steps = int(keras.ops.convert_to_numpy(model.optimizer.iterations))
    peak_memory = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux

    model = _average(config, model, checkpoint_dir)
    translator = Translator(model, tokenizer, beam_size=config.beam_size)
    alpha_bleu = _set_alpha(config, translator, valid_pairs)
    translator.save(config.run_dir)

    test = test_pairs[: config.eval_sentences or None]
    scores = evaluate_bleu(translator, test,
                           config.target_language if config.tokenized_bleu else None,
                           quiet=config.quiet)
    results = {
        "bleu": scores["bleu"], "bleu_signature": scores["bleu_signature"],
        **{name: scores[name] for name in ("tokenized_bleu", "tokenized_bleu_method")
           if name in scores},
        "chrf": scores["chrf"],
        "test_sentences": len(test), "training_minutes": minutes,
        "steps": steps, "gradient_accumulation_steps": config.gradient_accumulation_steps,
        "dtype_policy": config.dtype_policy, "dropout_rate": dropout_rate,
        "alpha": translator.alpha,
        "alpha_validation_bleu": None if alpha_bleu is None else {
            str(a): b for a, b in alpha_bleu.items()},
        "padding_efficiency": efficiency,
        "seconds_to_first_step": (None if budget.first_step_at is None
                                  else budget.first_step_at - program_start),
        "training_peak_memory_mib": peak_memory,
        "backend": keras.backend.backend(),
        "jit_compile": jit_compile, "static_shapes": static_shapes,
        "distribution": config.distribution,
        "data_parallel_size": parallelism.data_parallel_size,
        "parameters": model.count_params(),
    }
    with open(os.path.join(config.run_dir, "results.json"), "w") as f:
        json.dump(results, f, indent=2)
    print(f"BLEU {scores['bleu']:.2f}  chrF {scores['chrf']:.2f} on {len(test)} "
          f"test sentences, after {minutes:.1f} minutes of training ({scores['bleu_signature']})")
    if "tokenized_bleu" in scores:
        print(f"tokenized BLEU {scores['tokenized_bleu']:.2f} "
              f"({scores['tokenized_bleu_method']}; not comparable with the above)")
    for source, hypothesis, reference in scores["samples"]:
        print(f"  source:     {source}\n  translated: {hypothesis}\n  reference:  {reference}")
    return results


# What a resumed run must share with the run it continues: its data and
# their order, its vocabulary and model, and the settings the checkpoints
# already hold.
RESUME_FIELDS = ("corpus", "target_path", "source_language", "target_language", "preset",
                 "vocabulary_size", "subword_model", "tokens_per_batch", "max_length",
                 "long_pairs", "dropout_rate", "seed", "label_smoothing", "warmup_steps",
                 "optimizer", "peak_learning_rate", "learning_rate_decay", "ema_momentum",
                 "weight_decay", "clip_norm", "gradient_accumulation_steps",
                 "dtype_policy")


def check_config(config):
    """Fails on a bad setting before any work (on --resume too); returns
    `(parallelism, jit_compile)`. A bad distribution spec, or a preset that
    does not split over the devices, fails here."""
    check_fields(config, positive=("vocabulary_size", "tokens_per_batch",
                                   "gradient_accumulation_steps", "epochs", "warmup_steps",
                                   "keep_checkpoints", "beam_size"),
                 non_negative=("average_last", "max_minutes", "max_updates",
                               "peak_learning_rate", "weight_decay", "clip_norm",
                               "checkpoint_every_minutes",
                               "checkpoint_every_steps", "eval_sentences"))
    preset = get_preset(config.preset)["config"]
    parallelism = Parallelism(config.distribution)
    parallelism.check_model(preset["num_heads"], preset["d_ff"], preset["d_model"])
    jit_compile = resolve_jit_compile(config.jit_compile)
    check_non_negative("alpha", config.alpha, also="auto")
    check_max_length(config.max_length)
    for name in ("ema_momentum", "label_smoothing", "dropout_rate"):
        if getattr(config, name) not in (None, "auto"):
            check_rate(name, getattr(config, name))
    return parallelism, jit_compile


def _prepared_manifest(config):
    """A prepared corpus's manifest, or None for other corpora. Fails on
    a `--vocabulary-size` other than the corpus's: its ids are written."""
    if not is_prepared(config.corpus):
        return None
    manifest = read_manifest(config.corpus)
    if config.vocabulary_size not in (None, manifest["vocabulary_size"]):
        raise ValueError(
            f"--vocabulary-size {config.vocabulary_size}: {config.corpus} is tokenized with "
            f"{manifest['vocabulary_size']} pieces; train with --vocabulary-size "
            f"{manifest['vocabulary_size']}, or prepare the corpus again with "
            f"{config.vocabulary_size}")
    return manifest


def _tokenizer(config, train_pairs, resuming):
    """The run's tokenizer when resuming (`check_resume` made sure it is
    there); else a prepared corpus's, copied into the run directory, or one
    trained on both sides of the training split."""
    path = os.path.join(config.run_dir, TOKENIZER_FILE)
    prepared = os.path.join(config.corpus, TOKENIZER_FILE) if train_pairs is None else None
    if resuming:
        if prepared and not filecmp.cmp(path, prepared, shallow=False):
            raise ValueError(f"cannot resume: {path} differs from {prepared}, which "
                             "tokenized the corpus; was the corpus prepared again?")
        return load_tokenizer(path)
    if prepared:
        os.makedirs(config.run_dir, exist_ok=True)
        shutil.copyfile(prepared, path)
        return load_tokenizer(path)
    return train_tokenizer([side for pair in train_pairs for side in pair],
                           config.vocabulary_size or DEFAULT_VOCABULARY_SIZE, path,
                           model_type=config.subword_model)


def _average(config, model, checkpoint_dir):
    """`model`, or with `average_last` > 1 the mean of the last checkpoints."""
    checkpoints = list_checkpoints(checkpoint_dir)
    if config.average_last <= 1 or len(checkpoints) <= 1:
        return model
    paths = [p for _, p in checkpoints[-config.average_last:]]
    print(f"averaging the last {len(paths)} checkpoints")
    return average_checkpoints(paths)


def _set_alpha(config, translator, valid_pairs):
    """Sets the translator's length penalty: `config.alpha`, or with "auto"
    the best on the validation split; returns `{alpha: BLEU}` or None."""
    if config.alpha != "auto":
        translator.alpha = config.alpha
        return None
    valid = valid_pairs[:ALPHA_SENTENCES]
    alpha_bleu = choose_alpha(translator, valid, quiet=config.quiet)
    print(f"length penalty on {len(valid)} validation sentences: "
          + ", ".join(f"alpha {a}: BLEU {b:.2f}" for a, b in alpha_bleu.items())
          + f"; using alpha {translator.alpha}")
    return alpha_bleu
