"""Trains the same tiny model for a few steps under each distribution on 2
virtual CPU devices and writes what `test_distribution.py` checks as JSON.

    KERAS_BACKEND=jax XLA_FLAGS=--xla_force_host_platform_device_count=2 \
        python tests/distributed_worker.py OUT_DIR
    KERAS_BACKEND=tensorflow python tests/distributed_worker.py OUT_DIR

It runs in its own process because the device count is fixed when the
backend starts.
"""

import json
import os
import sys

import keras

if keras.backend.backend() == "tensorflow":
    import tensorflow as tf

    (cpu,) = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

import numpy as np  # noqa: E402

from keras_transformer.data.corpora import numbers_and_dates  # noqa: E402
from keras_transformer.data.pipeline import make_dataset  # noqa: E402
from keras_transformer.data.tokenizer import train_tokenizer  # noqa: E402
from keras_transformer.decoding import beam_search  # noqa: E402
from keras_transformer.distribution import Parallelism  # noqa: E402
from keras_transformer.losses import LabelSmoothedCrossEntropy  # noqa: E402
from keras_transformer.metrics import MaskedAccuracy  # noqa: E402
from keras_transformer.models import Transformer  # noqa: E402
from keras_transformer.optimizers import transformer_adam  # noqa: E402
from keras_transformer.training import TrainConfig, train  # noqa: E402
from keras_transformer.training.train import evaluate_bleu, load_splits  # noqa: E402
from keras_transformer.translator import Translator  # noqa: E402

STEPS = 4


def train_steps(spec, batches):
    """Builds the seeded tiny model under `spec`, fits `batches` (all of one
    shape) once, in order. As arrays, not a Python generator: under a
    `tf.distribute` strategy Keras 3.15 fits only the 2 batches it peeks of
    a generator (measured: 2 steps for 3, 4 or 5 batches)."""
    inputs = {k: np.concatenate([x[k] for x, _ in batches]) for k in batches[0][0]}
    labels = np.concatenate([y for _, y in batches])
    keras.utils.set_random_seed(0)
    parallelism = Parallelism(spec)
    with parallelism.scope():
        model = Transformer.from_preset("tiny", vocabulary_size=200, max_length=32,
                                        dropout_rate=0.0)  # same numbers on any sharding
        model.compile(optimizer=transformer_adam(model.d_model, 2, peak=2e-3),
                      loss=LabelSmoothedCrossEntropy(), metrics=[MaskedAccuracy()])
        history = model.fit(inputs, labels, batch_size=len(batches[0][1]), epochs=1,
                            verbose=0, shuffle=False)
    return model, parallelism, history.history


def layout(variable):
    """The per-device shard shapes and the sharding spec of `variable`."""
    value = variable.value
    if keras.backend.backend() == "jax":
        return {"spec": [a for a in value.sharding.spec] if hasattr(value.sharding, "spec")
                else None,
                "shards": [list(s.data.shape) for s in value.addressable_shards]}
    values = getattr(value, "values", [value])  # MirroredVariable: one per replica
    return {"spec": None, "shards": [list(v.shape) for v in values]}


def train_program(out_dir):
    """`train` under model parallelism, on digit words: sentences of 4
    words, so that few shapes compile."""
    digits = [("zero", "zéro"), ("one", "un"), ("two", "deux"), ("three", "trois"),
              ("four", "quatre"), ("five", "cinq"), ("six", "six"), ("seven", "sept"),
              ("eight", "huit"), ("nine", "neuf")]
    rng = np.random.default_rng(0)
    corpus = os.path.join(out_dir, "digits.tsv")
    with open(corpus, "w") as f:
        for _ in range(400):
            words = [digits[i] for i in rng.integers(0, 10, 4)]
            f.write(" ".join(e for e, _ in words) + "\t" + " ".join(t for _, t in words) + "\n")
    config = TrainConfig(
        corpus=corpus, run_dir=os.path.join(out_dir, "run"), vocabulary_size=40,
        tokens_per_batch=256, max_length=16, epochs=1, max_minutes=0,
        average_last=0, eval_sentences=4, beam_size=1, distribution="model:2")
    results = train(config)
    # The reported BLEU, recomputed from what the run saved.
    translator = Translator.load(config.run_dir)
    test = load_splits(config)[2][: config.eval_sentences]
    results["saved_translator_bleu"] = evaluate_bleu(translator, test)["bleu"]
    return results


def main(out_dir):
    pairs = numbers_and_dates(size=800)
    keras.utils.set_random_seed(0)
    tokenizer = train_tokenizer([s for p in pairs for s in p], 200,
                                os.path.join(out_dir, "tokenizer.model"))
    # In memory, as seeding a model destroys the tokenizer's TF resources;
    # up to STEPS batches of the most common shape, so the step compiles once.
    batches = list(make_dataset(pairs, tokenizer, tokens_per_batch=512, max_length=32,
                                shuffle=False, static_shapes=True,
                                batch_multiple=2).as_numpy_iterator())
    shapes = [b[1].shape for b in batches]
    common = max(set(shapes), key=shapes.count)
    batches = [b for b in batches if b[1].shape == common][:STEPS]
    probe = batches[0][0]

    specs = ["none", "data"] + (["model:2"] if keras.backend.backend() == "jax" else [])
    results = {"batches": len(batches), "devices": keras.distribution.list_devices()
               if keras.backend.backend() == "jax" else
               [d.name for d in tf.config.list_logical_devices("CPU")]}
    reference = None
    for spec in specs:
        model, parallelism, history = train_steps(spec, batches)
        logits = keras.ops.convert_to_numpy(model(probe, training=False))
        path = os.path.join(out_dir, spec.replace(":", "_") + ".keras")
        model.save(path)
        weights = {w.path: layout(w) for w in model.weights}
        results[spec] = {
            "replicas": parallelism.data_parallel_size,
            "steps": int(keras.ops.convert_to_numpy(model.optimizer.iterations)),
            "loss": history["loss"][-1],
            "accuracy": history["masked_accuracy"][-1],
            "max_logit_difference": None if reference is None
            else float(np.max(np.abs(logits - reference))),
            "layouts": weights,
        }
        reference = logits if reference is None else reference
        # Reload on a single device (no distribution), outside any scope.
        single = keras.saving.load_model(path)
        single_logits = keras.ops.convert_to_numpy(single(probe, training=False))
        results[spec]["reloaded_max_difference"] = float(np.max(np.abs(single_logits - logits)))
    # The most sharded model, reloaded on one device, decodes and translates
    # as the one-device model does (after a few steps both may still say
    # eos first, so the 2-best hypotheses are compared too).
    results["translations"], results["hypotheses"] = [], []
    for spec in (specs[0], specs[-1]):
        model = keras.saving.load_model(os.path.join(out_dir, spec.replace(":", "_") + ".keras"))
        tokens, scores = beam_search(model, probe["encoder_token_ids"][:4], beam_size=2,
                                     num_return=2, max_extra_length=4)
        results["hypotheses"].append({"tokens": tokens.tolist(), "scores": scores.tolist()})
        results["translations"].append(Translator(model, tokenizer, beam_size=2).translate(
            ["three hundred and twelve", ""]))

    if keras.backend.backend() == "jax":
        results["train"] = train_program(out_dir)
    try:
        Parallelism(specs[-1]).check_model(num_heads=3, d_ff=256, d_model=64)
    except ValueError as error:
        results["check_model_error"] = str(error)
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
