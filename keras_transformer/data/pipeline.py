"""The tf.data input pipeline of the paper's training (section 5.1).

Sentence pairs are tokenized with the shared SentencePiece vocabulary, given
bos/eos, and batched by approximate length with a token budget per batch
(the paper's ~25,000 source + 25,000 target tokens, scaled to the machine).
Each side of a batch is padded up to a bucket boundary, so the model sees a
bounded set of shapes (about 65 buckets on the shipped corpus). With
`static_shapes=True` both sides and the batch dimension are padded to the
bucket's size, so there is exactly one shape per bucket: what XLA
(TensorFlow, JAX) wants, as it compiles every new shape.
"""

import numpy as np

from keras_transformer.checks import check_choice
from keras_transformer.special_tokens import BOS_ID, EOS_ID, PAD_ID


# Static shapes' buckets grow by 20%: XLA compiles one program per bucket
# shape, and 10% buckets doubled the shapes for the same padding (18 shapes
# at 82.7% on the shipped corpus; docs/RESULTS.md). Dynamic shapes take 5%
# buckets (92.1% real tokens).
STATIC_BUCKET_STEP = 1.2


def bucket_boundaries(max_length, min_length=4, step=1.05):
    """Geometric length buckets, as tensor2tensor's: 4, 5, 6, ..., then
    growing by `step` (5%) up to `max_length` (included)."""
    boundaries, length = [], min_length
    while length < max_length:
        boundaries.append(length)
        length = max(length + 1, int(length * step))
    return boundaries + [max_length]


def doubling_boundaries(max_length):
    """16, 32, 64, 128, 256 below `max_length`, then `max_length`: few
    buckets, for batches of a fixed number of rows (BERT's), whose shapes
    they keep to one a bucket."""
    return [b for b in (16, 32, 64, 128, 256) if b < max_length] + [max_length]


def make_dataset(pairs, tokenizer, tokens_per_batch=4096, max_length=128,
                 long_pairs="drop", shuffle=True, seed=0, repeat=False,
                 static_shapes=False, batch_multiple=1, first_epoch=0):
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
        repeat: bool, an endless stream of epochs from `first_epoch` on,
            each shuffled by `(seed, epoch)` alone (see `epoch_stream`), for
            `fit(steps_per_epoch=...)`: a resumed run rebuilds the exact
            batches of any epoch. Without it, one epoch, reshuffled on every
            pass.
        static_shapes: bool, one shape per bucket: `(tokens_per_batch // L,
            L)` on both sides. A bucket's last, partial batch is filled with
            rows of padding, which the loss and metrics ignore.
        batch_multiple: int, every batch's row count is a multiple of it:
            the number of data-parallel replicas, which split the rows.
            Bucket batch sizes are rounded down to a multiple (at least one)
            and a bucket's last batch is filled up with rows of padding.
        first_epoch: int, the first epoch of a `repeat` stream.

    Returns:
        A batched, prefetched `tf.data.Dataset`, with tf.data's model-based
        autotuning off (see `without_autotuning`).
    """
    import tensorflow as tf

    _check_arguments(pairs, tokens_per_batch, max_length, long_pairs, batch_multiple)
    # The corpus tokenized in one pass, as one ragged block of each side.
    source, target = next(iter(_token_ids(pairs, tokenizer).ragged_batch(len(pairs))))
    block, lengths, kept = _examples(source, target, max_length, long_pairs)
    boundaries, batch_sizes = bucket_plan(tokens_per_batch, max_length, static_shapes,
                                          batch_multiple)

    def batch(rows, _):
        return _padded(block, rows, boundaries, batch_sizes if static_shapes else None,
                       batch_multiple)

    return planned_batches(lengths, kept, boundaries, batch_sizes, batch, shuffle, seed,
                           first_epoch if repeat else None)


def _examples(source, target, max_length, long_pairs):
    """Pairs' ragged token ids --> `(block, lengths, kept)`: the teacher-forcing
    examples as one ragged block (`_teacher_forcing`), each pair's length
    (its longer side, bos/eos included; int64) and the pairs within
    `max_length` (int64 indices)."""
    import tensorflow as tf

    inputs, labels = _teacher_forcing(source, target, max_length, long_pairs)
    lengths = tf.maximum(inputs["encoder_token_ids"].row_lengths(), labels.row_lengths())
    return (inputs, labels), lengths, tf.where(lengths <= max_length)[:, 0]


def _padded(block, rows, boundaries, batch_sizes, batch_multiple):
    """The batch of `block`'s examples at `rows`, padded (`pad_to_bucket`)."""
    import tensorflow as tf

    return pad_to_bucket(tf.nest.map_structure(lambda x: tf.gather(x, rows).to_tensor(), block),
                         boundaries, batch_sizes, batch_multiple)


def planned_batches(lengths, kept, boundaries, batch_sizes, batch, shuffle, seed,
                    first_epoch):
    """`batch(rows, batch_seed)` of each batch that `_batch_plan` plans
    from the rows' int64 `lengths` (row `i` in the bucket of `lengths[i]`:
    bucket `b` holds `(boundaries[b-1], boundaries[b]]` and takes
    `batch_sizes[b]` rows) and the `kept` rows: one epoch, in a new order
    on every pass with `shuffle`, or the endless stream from `first_epoch`
    on (`epoch_stream`); prefetched with the autotuner off
    (`without_autotuning`).

    `rows` is an int64 vector; `batch_seed`, an int64 `(2,)` stateless
    seed, a function of `seed`, the epoch and the batch's place in it,
    for a pipeline that draws random numbers per batch (the masked LM's
    masks): a resumed run draws them again."""
    import tensorflow as tf

    buckets = tf.searchsorted(tf.constant(boundaries, tf.int64), lengths, side="left")

    def epoch_batches(epoch):
        plan, _ = _batch_plan(kept, buckets, batch_sizes, shuffle, seed, epoch)
        epoch_seed = tf.stack([tf.constant(seed, tf.int64), epoch])
        return tf.data.Dataset.from_tensor_slices(plan).enumerate().map(
            lambda index, rows: (
                rows, tf.random.experimental.stateless_fold_in(epoch_seed, index)))

    return without_autotuning(_epochs(epoch_batches, shuffle, seed, first_epoch).map(
        batch, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True))


def _epochs(epoch_batches, shuffle, seed, first_epoch):
    """`epoch_batches(epoch)`, `epoch` a scalar int64 tensor: the endless
    stream from `first_epoch` on (`epoch_stream`), or with `first_epoch`
    None one epoch, in a new order on every pass with `shuffle` (its
    `epoch` drawn anew each time), else epoch 0."""
    import tensorflow as tf

    if first_epoch is not None:
        return epoch_stream(epoch_batches, first_epoch)
    if shuffle:
        return tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True).take(
            1).flat_map(epoch_batches)
    return epoch_batches(tf.constant(0, tf.int64))


def _batch_plan(kept, buckets, batch_sizes, shuffle, seed, epoch, partial=True):
    """One epoch's batches as the corpus rows of each, a ragged int64
    `(batches, None)`: the `kept` rows in an order drawn from `(seed,
    epoch)` (or as they are, without `shuffle`), grouped by bucket in that
    order, cut into batches of their bucket's `batch_sizes` rows (a
    bucket's last batch partial), and the batches shuffled by a second
    key. Without `partial` (a bool tensor too) the rows that do not fill
    a bucket's last batch make none. Returns the plan and those rows.

    The whole epoch is planned at once, in a few vectorized ops: tf.data's
    `bucket_by_sequence_length` gives the same batches element by element
    and took 12-14 times the CPU, which the training step needed on a
    2-core machine (docs/RESULTS.md)."""
    import tensorflow as tf

    seed = tf.constant(seed, tf.int64)
    order = kept
    if shuffle:
        order = tf.random.experimental.stateless_shuffle(kept, tf.stack([seed, epoch]))
    bucket = tf.gather(buckets, order)
    grouped = tf.argsort(bucket, stable=True)  # by bucket, the order kept within one
    order, bucket = tf.gather(order, grouped), tf.gather(bucket, grouped)
    count = len(batch_sizes)
    rows = tf.constant(batch_sizes, tf.int64)
    in_bucket = tf.math.bincount(bucket, minlength=count, maxlength=count, dtype=tf.int64)
    batches = (in_bucket + tf.cast(partial, tf.int64) * (rows - 1)) // rows  # per bucket
    rank = tf.range(tf.size(bucket, out_type=tf.int64)) - tf.gather(
        tf.cumsum(in_bucket, exclusive=True), bucket)  # a row's place in its bucket
    batch = tf.gather(tf.cumsum(batches, exclusive=True), bucket) + rank // tf.gather(
        rows, bucket)
    batched = rank < tf.gather(batches * rows, bucket)
    plan = tf.RaggedTensor.from_value_rowids(
        tf.boolean_mask(order, batched), tf.boolean_mask(batch, batched),
        nrows=tf.reduce_sum(batches))
    if shuffle:
        plan = tf.gather(plan, tf.random.experimental.stateless_shuffle(
            tf.range(plan.nrows()), tf.stack([seed, -1 - epoch])))
    return plan, tf.boolean_mask(order, ~batched)


def prepared_dataset(directory, tokens_per_batch=4096, max_length=128, long_pairs="drop",
                     shuffle=True, seed=0, repeat=False, static_shapes=False,
                     batch_multiple=1, first_epoch=0, window=2**16):
    """`make_dataset`'s batches from a prepared corpus (see
    `keras_transformer.data.prepared`), streamed: memory does not grow with
    the corpus, and the first batch waits for one window, not a pass.

    Each epoch reads the shards in an order drawn from `(seed, epoch)`,
    eight at a time interleaved, and plans the batches of each `window`
    of pairs at once (`_streamed`), in an order drawn from `(seed, epoch)`
    and the window's place, so an epoch's batches are a function of its
    number alone, as `make_dataset`'s, and a resumed run rebuilds them.
    `prepare` wrote every shard in random order, from pairs spread over
    the shards at random, so a window is a random sample of the corpus.

    Args:
        directory: a prepared corpus's directory.
        window: int, the pairs planned together (65,536: about 16 MB).
        Others: as `make_dataset`'s.
    """
    import tensorflow as tf

    from keras_transformer.data.prepared import decode_pairs, read_manifest, shard_paths

    manifest = read_manifest(directory)
    _check_arguments(manifest["shards"], tokens_per_batch, max_length, long_pairs,
                     batch_multiple)
    paths = tf.constant(shard_paths(directory, manifest))
    count = len(manifest["shards"])

    def windows(epoch):
        files = paths
        if shuffle:  # the key of window 0, which no window has (see `_streamed`)
            files = tf.gather(paths, tf.random.experimental.stateless_shuffle(
                tf.range(count), tf.stack([tf.cast(seed, tf.int64), epoch * 2**20])))
        return tf.data.Dataset.from_tensor_slices(files).interleave(
            tf.data.TFRecordDataset, cycle_length=min(count, 8), block_length=1,
            num_parallel_calls=min(count, 8), deterministic=True,
        ).batch(window).map(decode_pairs, num_parallel_calls=2)  # the next while one plans

    return _streamed(windows, tokens_per_batch, max_length, long_pairs, shuffle, seed,
                     static_shapes, batch_multiple, first_epoch if repeat else None)


def bucket_plan(tokens_per_batch, max_length, static_shapes=False, batch_multiple=1):
    """`(boundaries, batch_sizes)`: the length buckets (5%, or 20% with
    `static_shapes`) and the rows of a batch of each, the token budget over
    the bucket's length in whole multiples of `batch_multiple`."""
    boundaries = bucket_boundaries(
        max_length, step=STATIC_BUCKET_STEP if static_shapes else 1.05)
    batch_sizes = [max(1, tokens_per_batch // length // batch_multiple) * batch_multiple
                   for length in boundaries]
    return boundaries, batch_sizes


def count_batches(length_counts, tokens_per_batch, max_length=128, long_pairs="drop",
                  static_shapes=False, batch_multiple=1):
    """The batches of one epoch of `make_dataset` (or `prepared_dataset`),
    without reading it: a bucket of `n` pairs gives `ceil(n / rows)`
    batches whatever the order, its last one partial.

    Args:
        length_counts: `{length: pairs}`, a pair's length being its longer
            side in tokens, without bos/eos (a prepared corpus's
            manifest holds them).

    Returns:
        `(batches, pairs)`: the batch count and the pairs kept (not dropped
        for `max_length`).
    """
    boundaries, batch_sizes = bucket_plan(tokens_per_batch, max_length, static_shapes,
                                          batch_multiple)
    in_bucket = [0] * len(boundaries)
    for length, count in length_counts.items():
        length = int(length) + 1  # with eos (source, labels) or bos (decoder input)
        if long_pairs == "truncate":
            length = min(length, max_length)
        if length <= max_length:
            in_bucket[int(np.searchsorted(boundaries, length))] += count
    batches = sum(-(-n // rows) for n, rows in zip(in_bucket, batch_sizes))
    return batches, sum(in_bucket)


def _streamed(windows, tokens_per_batch, max_length, long_pairs, shuffle, seed,
              static_shapes, batch_multiple, first_epoch):
    """The training batches (see `make_dataset`) of the pairs that
    `windows(epoch)` gives as ragged `(source_ids, target_ids)` blocks,
    one epoch or, from `first_epoch` on, the endless stream (`_epochs`).

    Each window is planned as `make_dataset` plans a corpus (`_batch_plan`,
    window `w` of epoch `e` keyed `e * 2^20 + w`, from 1), but the rows
    that do not fill a bucket's batch wait for the next window's, and
    after the last window (an empty one keyed `e * 2^20 + 2^20 - 1`) each
    bucket's waiting rows make a partial batch. An epoch thus holds the
    batches `count_batches` counts, one partial batch a bucket, whatever
    the windows."""
    import tensorflow as tf

    boundaries, batch_sizes = bucket_plan(tokens_per_batch, max_length, static_shapes,
                                          batch_multiple)
    nothing = (tf.zeros([0], tf.int32), tf.zeros([0], tf.int64))  # (values, row lengths)
    none = tf.RaggedTensor.from_row_lengths(*nothing)

    def batches(epoch):
        # tf.data's scan keeps no ragged state: the pairs carried over from
        # one window to the next are each side's (values, row lengths).
        def plan(waiting, window):
            source, target, index, last = window
            source, target = (tf.concat([tf.RaggedTensor.from_row_lengths(*w), x], 0)
                              for w, x in zip(waiting, (source, target)))
            block, lengths, kept = _examples(source, target, max_length, long_pairs)
            buckets = tf.searchsorted(tf.constant(boundaries, tf.int64), lengths, side="left")
            rows, left = _batch_plan(kept, buckets, batch_sizes, shuffle, seed,
                                     epoch * 2**20 + index, partial=last)
            waiting = tuple((x.flat_values, x.row_lengths())
                            for x in (tf.gather(source, left), tf.gather(target, left)))
            return waiting, (block, rows)

        numbered = windows(epoch).enumerate(start=1).map(lambda index, pairs: (
            *(side.with_row_splits_dtype(tf.int64) for side in pairs), index, False))
        end = tf.data.Dataset.from_tensors((none, none, tf.constant(2**20 - 1, tf.int64), True))
        return numbered.concatenate(end).scan((nothing, nothing), plan).flat_map(
            lambda block, rows: tf.data.Dataset.zip(
                tf.data.Dataset.from_tensors(block).repeat(),
                tf.data.Dataset.from_tensor_slices(rows)))

    return without_autotuning(_epochs(batches, shuffle, seed, first_epoch).map(
        lambda block, rows: _padded(block, rows, boundaries,
                                    batch_sizes if static_shapes else None, batch_multiple),
        num_parallel_calls=tf.data.AUTOTUNE, deterministic=True))


def epoch_stream(batches, first_epoch=0):
    """The endless stream `batches(first_epoch), batches(first_epoch + 1),
    ...`, where `batches(epoch)` builds one epoch from a scalar int64
    tensor. An epoch's order is thus a function of its number alone, and
    not of how many passes came before, as with tf.data's reshuffling on
    every pass: a run resumed at epoch E sees the batches the uninterrupted
    run saw."""
    import tensorflow as tf

    return tf.data.Dataset.range(first_epoch, 2**62).flat_map(batches)


def ragged_rows(rows):
    """Lists of token ids --> an int32 `tf.RaggedTensor` `(rows, None)`."""
    import tensorflow as tf

    lengths = [len(r) for r in rows]
    flat = np.fromiter((t for r in rows for t in r), np.int32, sum(lengths))
    return tf.RaggedTensor.from_row_lengths(flat, np.asarray(lengths, np.int64))


def _check_arguments(pairs, tokens_per_batch, max_length, long_pairs, batch_multiple):
    check_choice("long_pairs", long_pairs, ("drop", "truncate"))
    if not pairs:
        raise ValueError("`pairs` is empty: there is nothing to train on.")
    if not isinstance(batch_multiple, int) or batch_multiple < 1:
        raise ValueError(f"`batch_multiple` must be an int >= 1. Received: {batch_multiple!r}")
    if tokens_per_batch < max_length:
        raise ValueError(
            f"`tokens_per_batch` must be >= max_length={max_length} so that "
            f"the longest bucket holds a pair. Received: tokens_per_batch={tokens_per_batch}"
        )


def _token_ids(pairs, tokenizer):
    """String pairs --> `(source_ids, target_ids)` int32 vectors, without
    bos/eos: SentencePiece in batches of 1,024, inside tf.data."""
    import tensorflow as tf

    sources, targets = zip(*pairs)
    return (
        tf.data.Dataset.from_tensor_slices((list(sources), list(targets)))
        .batch(1024)
        .map(lambda source, target: (tf.cast(tokenizer(source), tf.int32),
                                     tf.cast(tokenizer(target), tf.int32)),
             num_parallel_calls=tf.data.AUTOTUNE)
        .unbatch()
    )


def _teacher_forcing(source, target, max_length, long_pairs):
    """Pairs' token ids, ragged `(pairs, None)` without bos/eos, -->
    `({"encoder_token_ids": source + eos, "decoder_token_ids": bos +
    target}, target + eos)`, ragged, each side cut to `max_length` with
    `long_pairs="truncate"`."""
    import tensorflow as tf

    if long_pairs == "truncate":
        source, target = source[:, : max_length - 1], target[:, : max_length - 1]
    eos = tf.fill([source.nrows(), 1], EOS_ID)
    bos = tf.fill([source.nrows(), 1], BOS_ID)
    return {
        "encoder_token_ids": tf.concat([source, eos], 1),
        "decoder_token_ids": tf.concat([bos, target], 1),
    }, tf.concat([target, eos], 1)


def without_autotuning(dataset):
    """Prefetched, with tf.data's model-based autotuning off: deleting an
    iterator waits for the autotuner's next wake-up (up to 60 s apart), and
    Keras deletes each epoch's iterator on JAX and PyTorch, which held up
    the end of every epoch, and each `fit`'s on every backend
    (docs/RESULTS.md). AUTOTUNE then means one thread per core (at most
    16) for the maps and a prefetch buffer that grows on demand."""
    import tensorflow as tf

    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.prefetch(tf.data.AUTOTUNE).with_options(options)


def pad_to_bucket(batch, boundaries, batch_sizes=None, batch_multiple=1):
    """Pads each of `batch`'s `(rows, length)` tensors (a nest of them) to
    the smallest boundary that holds its length, and the rows to a
    multiple of `batch_multiple`, so a batch's shape is one of a few per
    bucket. With `batch_sizes` (rows per bucket), pads every tensor to the
    boundary of the longest and the rows to that bucket's batch size: one
    shape per bucket."""
    import tensorflow as tf

    table = tf.constant(boundaries, tf.int32)

    def bucket(length):
        return tf.searchsorted(table, [length])[0]

    tensors = tf.nest.flatten(batch)
    rows = tf.shape(tensors[0])[0]
    rows = (rows + batch_multiple - 1) // batch_multiple * batch_multiple
    if batch_sizes is not None:
        shared = bucket(tf.reduce_max([tf.shape(x)[1] for x in tensors]))
        rows = tf.constant(batch_sizes, tf.int32)[shared]

    def pad(x):
        index = bucket(tf.shape(x)[1]) if batch_sizes is None else shared
        padding = [[0, rows - tf.shape(x)[0]], [0, table[index] - tf.shape(x)[1]]]
        return tf.pad(x, padding, constant_values=PAD_ID)

    return tf.nest.map_structure(pad, batch)


def with_known_length(dataset):
    """`dataset` with its batch count (one pass, which also fills its
    cache) declared, so that Keras knows an epoch's length."""
    import tensorflow as tf

    count = sum(1 for _ in dataset)
    return dataset.apply(tf.data.experimental.assert_cardinality(count))


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


def causal_lm_dataset(rows, tokens_per_batch=4096, max_length=128, shuffle=True, seed=0,
                      static_shapes=False, first_epoch=None):
    """A `tf.data.Dataset` of `({"token_ids"}, labels)` batches for
    `CausalLM.fit`: each row `[bos] ids [eos]` (cut to `max_length + 1`
    tokens) gives the inputs `row[:-1]` and the labels `row[1:]`, padded
    with 0.

    Rows of similar length are batched together under a token budget (a
    length-`L` bucket holds `tokens_per_batch // L` rows) and padded to
    their bucket's boundary, 5% buckets, or 20% with `static_shapes` for
    XLA, which compiles one program per shape. Each epoch's batches are
    planned at once, as `make_dataset`'s.

    Args:
        rows: lists of token ids, one text each, without bos/eos.
        tokens_per_batch: int, at least `max_length`.
        max_length: int, the longest input (and label) row.
        shuffle: bool, shuffle rows and batches.
        seed: int, the shuffle seed.
        static_shapes: bool, coarser buckets (see above).
        first_epoch: None for one epoch, or the epoch an endless stream
            of epochs starts at, each epoch's order a function of `seed`
            and its number alone (`epoch_stream`).

    Returns:
        A prefetched dataset, as `make_dataset`'s.
    """
    import tensorflow as tf

    if not rows:
        raise ValueError("`rows` is empty: there is nothing to train on.")
    if tokens_per_batch < max_length:
        raise ValueError(
            f"`tokens_per_batch` must be >= max_length={max_length} so that "
            f"the longest bucket holds a row. Received: tokens_per_batch={tokens_per_batch}"
        )
    table = ragged_rows([[BOS_ID] + list(r)[:max_length - 1] + [EOS_ID] for r in rows])
    boundaries, batch_sizes = bucket_plan(tokens_per_batch, max_length, static_shapes)

    def batch(indices, _):  # rows [bos] ids [eos], padded to their bucket's boundary
        picked = tf.gather(table, indices)
        return pad_to_bucket(({"token_ids": picked[:, :-1].to_tensor()},
                              picked[:, 1:].to_tensor()), boundaries)

    return planned_batches(table.row_lengths() - 1, tf.range(table.nrows()), boundaries,
                           batch_sizes, batch, shuffle, seed, first_epoch)
