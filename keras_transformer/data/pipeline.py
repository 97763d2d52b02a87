"""The tf.data input pipeline of the paper's training (section 5.1).

Sentence pairs are tokenized with the shared SentencePiece vocabulary, given
bos/eos, and batched by approximate length with a token budget per batch
(the paper's ~25,000 source + 25,000 target tokens, scaled to the machine).
Each side of a batch is padded up to a bucket boundary, so the model sees a
bounded set of shapes (about 50 on the embedded corpus). With
`static_shapes=True` both sides and the batch dimension are padded to the
bucket's size, so there is exactly one shape per bucket: what XLA
(TensorFlow, JAX) wants, as it compiles every new shape.
"""

import numpy as np

from keras_transformer.data.tokenizer import BOS_ID, EOS_ID, PAD_ID


def bucket_boundaries(max_length, min_length=4, step=1.1):
    """Geometric length buckets, as tensor2tensor's: 4, 5, 6, ..., then
    growing by 10% up to `max_length` (included)."""
    boundaries, length = [], min_length
    while length < max_length:
        boundaries.append(length)
        length = max(length + 1, int(length * step))
    return boundaries + [max_length]


def make_dataset(pairs, tokenizer, tokens_per_batch=4096, max_length=128,
                 long_pairs="drop", shuffle=True, seed=0, repeat=False,
                 static_shapes=False):
    """A `tf.data.Dataset` of `({"encoder_token_ids", "decoder_token_ids"},
    target_ids)` batches for teacher forcing.

    Encoder input: `source + [eos]`; decoder input: `[bos] + target`;
    labels: `target + [eos]`; all int32 padded with 0.

    Args:
        pairs: a list of `(source, target)` strings.
        tokenizer: a keras-hub `SentencePieceTokenizer` (see
            `train_tokenizer`).
        tokens_per_batch: int, the token budget: a batch of length bucket
            `L` holds `tokens_per_batch // L` pairs.
        max_length: int, the longest tokenized side, bos/eos included.
        long_pairs: "drop" pairs longer than `max_length`, or "truncate"
            them.
        shuffle: bool, shuffle pairs and batches.
        seed: int, the shuffle seed.
        repeat: bool, repeat forever (for `steps_per_epoch`).
        static_shapes: bool, one shape per bucket: `(tokens_per_batch // L,
            L)` on both sides. A bucket's last, partial batch is filled with
            rows of padding, which the loss and metrics ignore.

    Returns:
        A batched, prefetched `tf.data.Dataset`.
    """
    import tensorflow as tf

    if long_pairs not in ("drop", "truncate"):
        raise ValueError(
            f"`long_pairs` must be 'drop' or 'truncate'. Received: long_pairs={long_pairs!r}"
        )
    if not pairs:
        raise ValueError("`pairs` is empty: there is nothing to train on.")
    boundaries = bucket_boundaries(max_length)
    if tokens_per_batch < max_length:
        raise ValueError(
            f"`tokens_per_batch` must be >= max_length={max_length} so that "
            f"the longest bucket holds a pair. Received: tokens_per_batch={tokens_per_batch}"
        )
    sources, targets = zip(*pairs)
    dataset = tf.data.Dataset.from_tensor_slices((list(sources), list(targets)))
    if shuffle:
        dataset = dataset.shuffle(len(pairs), seed=seed, reshuffle_each_iteration=True)

    def tokenize(source, target):
        # Batched tokenization inside tf.data: ragged (batch, None) ids.
        return tokenizer(source), tokenizer(target)

    def add_special_tokens(source, target):
        source = tf.cast(source, tf.int32)
        target = tf.cast(target, tf.int32)
        if long_pairs == "truncate":
            source = source[: max_length - 1]
            target = target[: max_length - 1]
        eos, bos = tf.constant([EOS_ID]), tf.constant([BOS_ID])
        return {
            "encoder_token_ids": tf.concat([source, eos], 0),
            "decoder_token_ids": tf.concat([bos, target], 0),
        }, tf.concat([target, eos], 0)

    def pair_length(inputs, labels):
        return tf.maximum(
            tf.shape(inputs["encoder_token_ids"])[0], tf.shape(labels)[0]
        )

    dataset = (
        dataset.batch(1024)
        .map(tokenize, num_parallel_calls=tf.data.AUTOTUNE)
        .unbatch()
        .map(add_special_tokens, num_parallel_calls=tf.data.AUTOTUNE)
        .filter(lambda inputs, labels: pair_length(inputs, labels) <= max_length)
    )
    # Bucket b holds lengths in (boundaries[b-1], boundaries[b]] and is
    # padded to boundaries[b].
    dataset = dataset.bucket_by_sequence_length(
        element_length_func=lambda inputs, labels: pair_length(inputs, labels) - 1,
        bucket_boundaries=boundaries,
        bucket_batch_sizes=[max(1, tokens_per_batch // b) for b in boundaries + [max_length]],
        padded_shapes=(
            {"encoder_token_ids": [None], "decoder_token_ids": [None]}, [None]
        ),
        padding_values=({"encoder_token_ids": PAD_ID, "decoder_token_ids": PAD_ID}, PAD_ID),
        pad_to_bucket_boundary=False,
    )
    dataset = dataset.map(
        lambda inputs, labels: _pad_to_bucket(
            inputs, labels, boundaries, tokens_per_batch if static_shapes else None
        )
    )
    if shuffle:
        dataset = dataset.shuffle(64, seed=seed)
    if repeat:
        dataset = dataset.repeat()
    return dataset.prefetch(tf.data.AUTOTUNE)


def _pad_to_bucket(inputs, labels, boundaries, tokens_per_batch=None):
    """Pads encoder and decoder sides each to the smallest boundary that
    holds them, so a batch's shape is one of a few per bucket. With
    `tokens_per_batch`, pads both sides to the boundary of the longer one
    and the batch to `tokens_per_batch // boundary` rows: one shape per
    bucket."""
    import tensorflow as tf

    table = tf.constant(boundaries, tf.int32)

    def boundary(length):
        return tf.gather(table, tf.searchsorted(table, [length])[0])

    def pad(x, length, rows):
        padding = [[0, rows - tf.shape(x)[0]], [0, length - tf.shape(x)[1]]]
        return tf.pad(x, padding, constant_values=PAD_ID)

    if tokens_per_batch is None:
        def fit(x):
            return pad(x, boundary(tf.shape(x)[1]), tf.shape(x)[0])
    else:
        length = boundary(tf.maximum(
            tf.shape(inputs["encoder_token_ids"])[1], tf.shape(labels)[1]))
        rows = tokens_per_batch // length

        def fit(x):
            return pad(x, length, rows)

    return {k: fit(v) for k, v in inputs.items()}, fit(labels)


def padding_efficiency(dataset, max_batches=None):
    """Real tokens / batch slots over encoder inputs and labels.

    Returns:
        A float in (0, 1].
    """
    return batch_statistics(dataset, max_batches)["padding_efficiency"]


def batch_statistics(dataset, max_batches=None):
    """One pass over `dataset`: its number of batches and its padding
    efficiency (real tokens / batch slots, encoder inputs and labels).

    Returns:
        A dict with "batches" and "padding_efficiency".
    """
    batches = real = slots = 0
    for inputs, labels in dataset.as_numpy_iterator():
        if max_batches is not None and batches >= max_batches:
            break
        batches += 1
        for ids in (inputs["encoder_token_ids"], labels):
            real += int(np.count_nonzero(ids))
            slots += ids.size
    return {"batches": batches, "padding_efficiency": real / max(slots, 1)}
