"""Batches for a `SequenceClassifier`: sentences or sentence pairs packed
as BERT reads them, and the pair task a parallel corpus gives for free."""

import random

import numpy as np

from keras_transformer.checks import check_positive_int
from keras_transformer.data.pipeline import (
    doubling_boundaries,
    pad_to_bucket,
    planned_batches,
)
from keras_transformer.special_tokens import BOS_ID, EOS_ID, PAD_ID


def pack_pairs(first, second=None, max_length=128):
    """Sentences, or sentence pairs, as a classifier reads them.

    `[bos] A [eos]` with segment ids 0, or `[bos] A [eos] B [eos]` with 0
    over the first part and 1 over B; the longer sentence is truncated
    first (keras-hub's `MultiSegmentPacker`, "round_robin").

    Args:
        first, second: lists of token-id lists (second optional).
        max_length: int, every row is padded to this length.

    Returns:
        `{"token_ids", "segment_ids"}`: int32 NumPy `(rows, max_length)`.
    """
    import keras_hub
    import tensorflow as tf

    packer = keras_hub.layers.MultiSegmentPacker(
        sequence_length=max_length, start_value=BOS_ID, end_value=EOS_ID,
        pad_value=PAD_ID,
    )
    parts = [tf.ragged.constant(first, tf.int32)]
    if second is not None:
        parts.append(tf.ragged.constant(second, tf.int32))
    token_ids, segment_ids = packer(tuple(parts))
    return {"token_ids": np.asarray(token_ids, "int32"),
            "segment_ids": np.asarray(segment_ids, "int32")}


def translation_pairs(pairs, seed=0):
    """Is the second sentence the translation of the first? Each pair
    `(source, target)` gives a positive example (label 1) and a negative
    one (label 0): the source with the target of another pair, drawn by a
    seeded shuffle that moves every target.

    Returns:
        `(firsts, seconds, labels)`, `2 * len(pairs)` examples, positives
        and negatives alternating.
    """
    if len(pairs) < 2:
        raise ValueError(f"`pairs` must hold at least 2 pairs. Received: {len(pairs)}")
    n = len(pairs)
    # A random rotation of a random order: no target stays with its source.
    order = list(range(n))
    random.Random(seed).shuffle(order)
    shift = random.Random(seed + 1).randrange(1, n)
    other = {order[i]: order[(i + shift) % n] for i in range(n)}
    firsts, seconds, labels = [], [], []
    for i, (source, target) in enumerate(pairs):
        firsts += [source, source]
        seconds += [target, pairs[other[i]][1]]
        labels += [1, 0]
    return firsts, seconds, labels


def classification_dataset(packed, labels, batch_size=32, shuffle=True, seed=0,
                           first_epoch=None):
    """A `tf.data.Dataset` of `({"token_ids", "segment_ids"}, labels)`
    batches: rows of similar length batched together and padded to 16,
    32, 64, ... tokens (`doubling_boundaries`, one shape per bucket), not
    to all of `pack_pairs`'s `max_length`.

    Args:
        packed: `pack_pairs`'s output.
        labels: int class ids, one a row.
        batch_size: int.
        shuffle: bool.
        seed: int, the shuffle seed.
        first_epoch: None for one epoch, or the epoch an endless stream
            of epochs starts at (`planned_batches`).
    """
    import tensorflow as tf

    check_positive_int("batch_size", batch_size)
    token_ids = packed["token_ids"]
    if len(labels) != len(token_ids) or not len(labels):
        raise ValueError(
            f"`labels` must hold one class id per row, and there must be rows. "
            f"Received: {len(labels)} labels for {len(token_ids)} rows")
    lengths = np.count_nonzero(token_ids != PAD_ID, axis=1)  # (rows,) int64
    rows = {name: tf.RaggedTensor.from_tensor(ids, lengths=lengths)
            for name, ids in packed.items()}
    labels = tf.constant(labels, tf.int32)
    boundaries = doubling_boundaries(token_ids.shape[1])

    def batch(indices, _):
        inputs = {name: tf.gather(ids, indices).to_tensor() for name, ids in rows.items()}
        return pad_to_bucket(inputs, boundaries), tf.gather(labels, indices)

    return planned_batches(tf.constant(lengths), tf.range(len(lengths), dtype=tf.int64),
                           boundaries, [batch_size] * len(boundaries), batch, shuffle, seed,
                           first_epoch)
