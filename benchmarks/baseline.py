"""The plain alternative the demo must beat: a translator as a Keras user
first writes one, from `keras.layers` alone, trained and scored by `train`'s
own harness on the same splits for the same time budget.

    python -m benchmarks.baseline                 # the baseline, 10 minutes
    python -m benchmarks.baseline --demo          # `make demo`, then the baseline: ratios
    python -m benchmarks.baseline --demo --run-dir runs/demo   # and keep the demo's run

The model follows the keras.io sequence-to-sequence example: learned token
and position embeddings, 2 encoder and 2 decoder layers of
`keras.layers.MultiHeadAttention` (d_model 128, 4 heads, feed-forward
512, post-norm, dropout 0.1), an untied output `Dense`; a shared
SentencePiece vocabulary of 4,000 pieces of the model `train` takes
(`--subword-model`, BPE by default); every sentence padded or cut to 48
tokens; batches of 64 sentences; Adam at 1e-3; cross-entropy
without label smoothing; greedy decoding; no averaging. `--demo` prints
BLEU and chrF of both, their ratios, the steps each got and the
machine's measured matmul peak, read just before and just after each
run, as the machine's speed can move between two 10-minute runs.
"""

import argparse
import json
import os
import tempfile
import time

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from benchmarks.training import matmul_peak_reader
from keras_transformer.data.tokenizer import detokenize, token_ids, train_tokenizer
from keras_transformer.freed_memory import keep_freed_memory
from keras_transformer.special_tokens import BOS_ID, EOS_ID, PAD_ID
from keras_transformer.training import TrainConfig, train
from keras_transformer.training.runs import TrainingBudget
from keras_transformer.training.train import evaluate_bleu, load_splits

LENGTH = 48  # tokens a side, bos/eos included
SIZES = dict(d_model=128, num_heads=4, d_ff=512, num_layers=2, dropout_rate=0.1)


class TokenAndPosition(keras.layers.Layer):
    """Token embedding plus a learned position embedding; masks padding."""

    def __init__(self, vocabulary_size, length, d_model, **kwargs):
        super().__init__(**kwargs)
        self.tokens = keras.layers.Embedding(vocabulary_size, d_model)
        self.positions = keras.layers.Embedding(length, d_model)

    def call(self, ids):  # (batch, length) -> (batch, length, d_model)
        return self.tokens(ids) + self.positions(ops.arange(ops.shape(ids)[-1]))

    def compute_mask(self, ids, mask=None):
        return ops.not_equal(ids, PAD_ID)


def _feed_forward(x, d_model, d_ff, dropout_rate):
    y = keras.layers.Dense(d_ff, activation="relu")(x)
    y = keras.layers.Dropout(dropout_rate)(keras.layers.Dense(d_model)(y))
    return keras.layers.LayerNormalization()(keras.layers.Add()([x, y]))


def _attention(query, value, num_heads, d_model, dropout_rate, causal=False):
    y = keras.layers.MultiHeadAttention(num_heads, d_model // num_heads,
                                        dropout=dropout_rate)(
        query, value, use_causal_mask=causal)
    y = keras.layers.Dropout(dropout_rate)(y)
    return keras.layers.LayerNormalization()(keras.layers.Add()([query, y]))


def baseline_model(vocabulary_size, length=LENGTH, d_model=128, num_heads=4, d_ff=512,
                   num_layers=2, dropout_rate=0.1):
    """The keras.io-style Transformer: `{"encoder_token_ids",
    "decoder_token_ids"}` int `(batch, length)` -> logits `(batch, length,
    vocabulary_size)`."""
    encoder_ids = keras.Input((length,), dtype="int32", name="encoder_token_ids")
    decoder_ids = keras.Input((length,), dtype="int32", name="decoder_token_ids")
    x = TokenAndPosition(vocabulary_size, length, d_model)(encoder_ids)
    for _ in range(num_layers):
        x = _attention(x, x, num_heads, d_model, dropout_rate)
        x = _feed_forward(x, d_model, d_ff, dropout_rate)
    y = TokenAndPosition(vocabulary_size, length, d_model)(decoder_ids)
    for _ in range(num_layers):
        y = _attention(y, y, num_heads, d_model, dropout_rate, causal=True)
        y = _attention(y, x, num_heads, d_model, dropout_rate)
        y = _feed_forward(y, d_model, d_ff, dropout_rate)
    logits = keras.layers.Dense(vocabulary_size)(y)
    return keras.Model({"encoder_token_ids": encoder_ids,
                        "decoder_token_ids": decoder_ids}, logits)


def _padded(rows, length=LENGTH):
    """Lists of ids -> int32 `(len(rows), length)`, cut or padded with 0."""
    out = np.full((len(rows), length), PAD_ID, "int32")
    for i, row in enumerate(rows):
        row = row[:length]
        out[i, :len(row)] = row
    return out


def teacher_forcing(tokenizer, pairs, length=LENGTH):
    """`(inputs, labels)`: sources + eos, bos + targets, targets + eos, each
    cut or padded to `length`."""
    sources = token_ids(tokenizer, [s for s, _ in pairs])
    targets = token_ids(tokenizer, [t for _, t in pairs])
    inputs = {"encoder_token_ids": _padded([s + [EOS_ID] for s in sources], length),
              "decoder_token_ids": _padded([[BOS_ID] + t for t in targets], length)}
    return inputs, _padded([t + [EOS_ID] for t in targets], length)


class GreedyTranslator:
    """Strings in, strings out, as `Translator.translate`: the keras.io
    example's decoding, one full forward pass a generated token, a batch
    at a time."""

    def __init__(self, model, tokenizer, length=LENGTH, batch_size=256):
        self.model, self.tokenizer = model, tokenizer
        self.length, self.batch_size = length, batch_size

    def translate_ids(self, source):
        """int `(batch, length)` sources -> int `(batch, length)` outputs,
        bos first: each token the argmax after the ones before it."""
        decoder = np.zeros_like(source)
        decoder[:, 0] = BOS_ID
        for t in range(self.length - 1):
            logits = self.model.predict_on_batch(
                {"encoder_token_ids": source, "decoder_token_ids": decoder})
            decoder[:, t + 1] = np.argmax(keras.ops.convert_to_numpy(logits)[:, t], axis=-1)
        return decoder

    def translate(self, sentences, progress=None):
        outputs = []
        for start in range(0, len(sentences), self.batch_size):
            chunk = sentences[start:start + self.batch_size]
            source = _padded([ids + [EOS_ID] for ids in token_ids(self.tokenizer, chunk)],
                             self.length)
            for row in self.translate_ids(source)[:, 1:].tolist():
                outputs.append(row[:row.index(EOS_ID)] if EOS_ID in row else row)
            if progress is not None:
                progress.advance(len(chunk))
        return detokenize(self.tokenizer, outputs)


def run_baseline(corpus="bible", minutes=10.0, max_steps=0, eval_sentences=1000,
                 vocabulary_size=4000, batch_size=64, seed=0, **sizes):
    """Trains the baseline on `corpus`'s training split for `minutes` (or
    `max_steps` batches), then scores it on the first `eval_sentences`
    test pairs with `train`'s `evaluate_bleu`; returns a dict."""
    keras.utils.set_random_seed(seed)
    config = TrainConfig(corpus=corpus, seed=seed)
    train_pairs, _, test_pairs = load_splits(config)
    with tempfile.TemporaryDirectory() as temporary:  # the model file is read in
        tokenizer = train_tokenizer([side for pair in train_pairs for side in pair],
                                    vocabulary_size, os.path.join(temporary, "baseline.model"),
                                    model_type=config.subword_model)
    inputs, labels = teacher_forcing(tokenizer, train_pairs)
    data = (tf.data.Dataset.from_tensor_slices((inputs, labels))
            .shuffle(len(labels), seed=seed).batch(batch_size).repeat())
    model = baseline_model(int(tokenizer.vocabulary_size()), **{**SIZES, **sizes})
    model.compile(optimizer=keras.optimizers.Adam(1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True,
                                                                  ignore_class=PAD_ID))
    budget = TrainingBudget(minutes, max_steps)
    start = time.monotonic()
    model.fit(data, epochs=10_000, steps_per_epoch=max(1, len(labels) // batch_size),
              callbacks=[budget], verbose=0, shuffle=False)  # the dataset shuffles
    training_minutes = (time.monotonic() - start) / 60.0
    test = test_pairs[: eval_sentences or None]
    scores = evaluate_bleu(GreedyTranslator(model, tokenizer), test)
    return {"bleu": scores["bleu"], "chrf": scores["chrf"], "steps": budget.batches,
            "training_minutes": training_minutes, "test_sentences": len(test),
            "parameters": model.count_params(), "backend": keras.backend.backend()}


def side_by_side(minutes=10.0, eval_sentences=1000, seed=0, run_dir=None):
    """`make demo`'s `train` with its defaults, then the baseline for the
    same minutes on the same splits; returns both, their ratios, and the
    matmul peak read before, between and after the two runs (each run's
    `matmul_peak_flops`: the readings just before and just after it)."""
    read_peak = matmul_peak_reader()
    peaks = [read_peak()]
    with tempfile.TemporaryDirectory() as temporary:
        demo = train(TrainConfig(run_dir=run_dir or os.path.join(temporary, "demo"),
                                 max_minutes=minutes, eval_sentences=eval_sentences,
                                 seed=seed, quiet=True))
    peaks.append(read_peak())
    baseline = run_baseline(minutes=minutes, eval_sentences=eval_sentences, seed=seed)
    peaks.append(read_peak())
    demo = {k: demo[k] for k in ("bleu", "chrf", "steps", "training_minutes", "dropout_rate")}
    demo["matmul_peak_flops"], baseline["matmul_peak_flops"] = peaks[:2], peaks[1:]
    return {"demo": demo, "baseline": baseline,
            "bleu_ratio": demo["bleu"] / max(baseline["bleu"], 1e-9),
            "chrf_ratio": demo["chrf"] / max(baseline["chrf"], 1e-9), "seed": seed}


def _summary(name, result):
    """One run's line: its scores, steps and the matmul peak beside it."""
    peaks = [flops / 1e9 for flops in result["matmul_peak_flops"]]
    return (f"{name} BLEU {result['bleu']:.2f}, chrF {result['chrf']:.2f}, "
            f"{result['steps']:,} steps in {result['training_minutes']:.1f} minutes, "
            f"matmul peak {min(peaks):.0f}-{max(peaks):.0f} GFLOP/s")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--demo", action="store_true",
                        help="run make demo's training first, then the baseline")
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--eval-sentences", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="save the figures here")
    parser.add_argument("--run-dir", help="with --demo: keep the demo's run directory "
                                          "(model.keras, tokenizer, results.json) here")
    args = parser.parse_args(argv)
    if args.run_dir and not args.demo:
        parser.error(f"--run-dir {args.run_dir}: only with --demo, whose run it keeps")
    if args.demo:
        result = side_by_side(args.minutes, args.eval_sentences, args.seed, args.run_dir)
        print(_summary("demo:    ", result["demo"])
              + f", residual dropout {result['demo']['dropout_rate']}")
        print(_summary("baseline:", result["baseline"]))
        print(f"ratios: BLEU {result['bleu_ratio']:.2f}x, chrF {result['chrf_ratio']:.2f}x")
    else:
        read_peak = matmul_peak_reader()
        before = read_peak()
        result = run_baseline(minutes=args.minutes, eval_sentences=args.eval_sentences,
                              seed=args.seed)
        result["matmul_peak_flops"] = [before, read_peak()]
        print(_summary("baseline:", result))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return result


if __name__ == "__main__":
    keep_freed_memory()  # as the package's programs run
    main()
