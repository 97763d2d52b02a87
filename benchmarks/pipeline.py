"""The input pipeline: `fit` fed by the tf.data pipeline against the same
batches held in memory, and the padding efficiency of length bucketing
against fixed-length padding, on the shipped Bible corpus.
"""

import os
import tempfile

import keras
import numpy as np

from keras_transformer.data.corpora import bible_en_fr
from keras_transformer.data.pipeline import batch_statistics, make_dataset
from keras_transformer.data.tokenizer import load_tokenizer, token_ids, train_tokenizer
from keras_transformer.losses import LabelSmoothedCrossEntropy
from keras_transformer.models import Transformer

from benchmarks.timing import compare


def padding_baselines(lengths, tokens_per_batch, seed=0):
    """Real tokens / batch slots without bucketing, for pairs of tokenized
    `lengths` (`(pairs, 2)`, bos/eos included):

    - "fixed": every side padded to the longest sequence of the corpus
      (one static shape);
    - "per_batch": random batches of the same row count, each padded to
      its own longest sequence (dynamic padding, no length sorting).
    """
    lengths = np.asarray(lengths)
    longest = int(lengths.max())
    rows = max(1, tokens_per_batch // longest)
    order = np.random.default_rng(seed).permutation(len(lengths))
    slots = sum(2 * len(chunk) * int(lengths[chunk].max())
                for chunk in np.array_split(order, max(1, len(order) // rows)))
    real = int(lengths.sum())
    return {"fixed": real / (lengths.size * longest), "per_batch": real / slots}


def run(pairs=2000, vocabulary_size=2000, tokens_per_batch=4096, max_length=128,
        preset="tiny", rounds=3):
    """Returns `{"tf_data_vs_memory": ..., "padding_efficiency": ...}`."""
    corpus = bible_en_fr("train")[:pairs]
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "tokenizer.model")
        train_tokenizer([side for pair in corpus for side in pair], vocabulary_size, path)
        keras.utils.set_random_seed(0)
        tokenizer = load_tokenizer(path)  # after seeding (see data/tokenizer.py)
        # Keras's "auto" compiles `fit` with XLA on TensorFlow and JAX, which
        # needs the static shapes (as `train` gives them whenever XLA is on).
        static = keras.backend.backend() != "torch"
        dataset = make_dataset(corpus, tokenizer, tokens_per_batch, max_length,
                               shuffle=True, static_shapes=static)
        stats = batch_statistics(make_dataset(corpus, tokenizer, tokens_per_batch,
                                              max_length, shuffle=False))
        in_memory = list(dataset.as_numpy_iterator())
        ids = (token_ids(tokenizer, [s for s, _ in corpus]),
               token_ids(tokenizer, [t for _, t in corpus]))
        # As batch_statistics counts: encoder inputs and labels, each + eos.
        lengths = [(len(s) + 1, len(t) + 1) for s, t in zip(*ids)]
    lengths = [pair for pair in lengths if max(pair) <= max_length]

    model = Transformer.from_preset(preset, vocabulary_size=vocabulary_size,
                                    max_length=max_length)
    model.compile(optimizer="adam", loss=LabelSmoothedCrossEntropy(0.1))

    def fit_tf_data(_):
        return np.float32(model.fit(dataset, epochs=1, verbose=0).history["loss"][-1])

    def fit_in_memory(_):
        batches = (batch for batch in in_memory)
        return np.float32(model.fit(batches, epochs=1, verbose=0).history["loss"][-1])

    timing = compare(fit_tf_data, fit_in_memory, None, rounds)
    return {
        "backend": keras.backend.backend(), "pairs": len(corpus),
        "batches": len(in_memory), "tf_data_vs_memory": timing,
        "padding_efficiency": dict(bucketed=stats["padding_efficiency"],
                                   **padding_baselines(lengths, tokens_per_batch)),
    }
