import collections

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

from keras_transformer.data.corpora import bible_en_fr, numbers_and_dates
from keras_transformer.data.pipeline import (
    STATIC_BUCKET_STEP,
    _batch_plan,
    bucket_boundaries,
    causal_lm_dataset,
    make_dataset,
    padding_efficiency,
    planned_batches,
)
from keras_transformer.data.tokenizer import (
    BOS_ID,
    EOS_ID,
    load_tokenizer,
    token_ids,
    train_tokenizer,
)
from tests.helpers import subword_model


@pytest.fixture(scope="module")
def numbers_tokenizer_path(tmp_path_factory):
    pairs = numbers_and_dates("train", size=2000)
    path = str(tmp_path_factory.mktemp("tok") / "tokenizer.model")
    train_tokenizer([s for p in pairs for s in p], 400, path)
    return path


@pytest.fixture
def numbers_tokenizer(numbers_tokenizer_path):
    # Loaded after the per-test seed reset (see data/tokenizer.py).
    return load_tokenizer(numbers_tokenizer_path), numbers_tokenizer_path


def test_tokenizer_round_trip_and_special_ids(numbers_tokenizer):
    tokenizer, path = numbers_tokenizer
    texts = ["three hundred and twelve", "5 décembre 2050", "Ünïcode ☃ unknown"]
    ids = token_ids(tokenizer, texts)
    decoded = np.asarray(load_tokenizer(path).detokenize(ids[:2])).tolist()
    decoded = [t.decode() if isinstance(t, bytes) else t for t in decoded]
    assert decoded == texts[:2]
    assert 3 in ids[2]  # characters never seen in training map to unk (3)
    vocab = tokenizer.get_vocabulary()
    assert vocab[0] == "<pad>" and vocab[BOS_ID] == "<s>" and vocab[EOS_ID] == "</s>"


@pytest.mark.parametrize("model_type", ["unigram", "bpe"])
def test_train_tokenizer_trains_the_model_asked_for(tmp_path, model_type):
    pairs = numbers_and_dates("train", size=500)
    path = str(tmp_path / "tokenizer.model")
    tokenizer = train_tokenizer([s for p in pairs for s in p], 200, path, model_type=model_type)
    assert subword_model(path) == model_type.upper()
    texts = ["three hundred and twelve", "5 décembre 2050"]
    decoded = np.asarray(tokenizer.detokenize(token_ids(tokenizer, texts))).tolist()
    assert [t.decode() if isinstance(t, bytes) else t for t in decoded] == texts
    with pytest.raises(ValueError, match=r"one of 'bpe', 'unigram'. Received: model_type='char'"):
        train_tokenizer(["a b"], 200, path, model_type="char")


def test_an_epoch_stream_rebuilds_any_epoch_and_position(numbers_tokenizer):
    # What exact resume needs: epoch e of the stream depends on (seed, e)
    # alone, so a stream started at epoch 1 and skipped 5 batches gives the
    # batches the whole stream gave there; each epoch is one permutation
    # of the same examples.
    tokenizer, _ = numbers_tokenizer
    pairs = numbers_and_dates("train", size=1000)

    def labels(dataset, count):
        return [y for _, y in dataset.take(count).as_numpy_iterator()]

    single = labels(make_dataset(pairs, tokenizer, 256, 32, shuffle=False), -1)
    batches = len(single)
    whole = labels(make_dataset(pairs, tokenizer, 256, 32, repeat=True), 3 * batches)
    later = labels(make_dataset(pairs, tokenizer, 256, 32, repeat=True, first_epoch=1)
                   .skip(5), 2 * batches - 5)
    assert len(whole) == 3 * batches and len(later) == 2 * batches - 5
    for a, b in zip(whole[batches + 5:], later, strict=True):
        np.testing.assert_array_equal(a, b)

    def rows(epoch):
        return sorted(tuple(r[r > 0]) for y in epoch for r in y)

    assert rows(whole[:batches]) == rows(whole[batches:2 * batches]) == rows(single)
    assert not all(a.shape == b.shape and (a == b).all()
                   for a, b in zip(whole[:batches], whole[batches:2 * batches]))
    other_seed = labels(make_dataset(pairs, tokenizer, 256, 32, seed=1, repeat=True), batches)
    assert not all(a.shape == b.shape and (a == b).all()
                   for a, b in zip(whole[:batches], other_seed))


@settings(max_examples=40, deadline=None)
@given(buckets=st.lists(st.integers(0, 4), min_size=1, max_size=120),
       batch_sizes=st.lists(st.integers(1, 9), min_size=5, max_size=5),
       dropped=st.sets(st.integers(0, 119)), shuffle=st.booleans(),
       epoch=st.integers(0, 3), partial=st.booleans())
def test_an_epoch_plan_fills_every_batch_but_one_a_bucket(buckets, batch_sizes, dropped,
                                                          shuffle, epoch, partial):
    # What bucketing one example at a time gives (and `count_batches`
    # counts): each kept row once, in batches of one bucket, full but for
    # at most one a bucket. Without `partial` (a window of a stream), the
    # rows short of a full batch are handed back instead.
    kept = [i for i in range(len(buckets)) if i not in dropped]

    def plan(epoch):
        batches, left = _batch_plan(tf.constant(kept, tf.int64), tf.constant(buckets, tf.int64),
                                    batch_sizes, shuffle, 0, tf.constant(epoch, tf.int64),
                                    partial=partial)
        return batches.to_list(), left.numpy().tolist()

    batches, left = plan(epoch)
    assert sorted(sum(batches, []) + left) == kept
    partial_batches = collections.Counter()
    for batch in batches:
        bucket = {buckets[row] for row in batch}
        assert len(bucket) == 1
        bucket = bucket.pop()
        assert 0 < len(batch) <= batch_sizes[bucket]
        partial_batches[bucket] += len(batch) < batch_sizes[bucket]
    in_bucket = collections.Counter(buckets[row] for row in kept)
    if partial:
        assert not left and max(partial_batches.values(), default=0) <= 1
        assert len(batches) == sum(-(-n // batch_sizes[b]) for b, n in in_bucket.items())
    else:
        assert not any(partial_batches.values())
        assert collections.Counter(buckets[row] for row in left) == {
            b: n % batch_sizes[b] for b, n in in_bucket.items() if n % batch_sizes[b]}
    if shuffle and epoch == 0 and len(kept) > 20:  # another epoch, another plan
        assert plan(1)[0] != batches


def test_batches_respect_the_token_budget_and_teacher_forcing(numbers_tokenizer):
    tokenizer, _ = numbers_tokenizer
    pairs = numbers_and_dates("valid")
    boundaries = bucket_boundaries(64)  # 5% buckets without static shapes
    dataset = make_dataset(pairs, tokenizer, tokens_per_batch=256, max_length=64,
                           shuffle=False)
    count = 0
    for inputs, labels in dataset.as_numpy_iterator():
        enc, dec = inputs["encoder_token_ids"], inputs["decoder_token_ids"]
        assert enc.shape[1] in boundaries and dec.shape == labels.shape
        assert labels.shape[1] in boundaries
        # The batch size comes from the bucket of the longer side.
        assert enc.shape[0] * min(b for b in boundaries if b >= max(
            np.count_nonzero(enc, 1).max(), np.count_nonzero(labels, 1).max())) <= 256
        for e, d, y in zip(enc, dec, labels):
            n = np.count_nonzero(y)
            assert y[n - 1] == EOS_ID and d[0] == BOS_ID
            np.testing.assert_array_equal(d[1:n], y[: n - 1])  # shifted right
            assert e[np.count_nonzero(e) - 1] == EOS_ID
        count += enc.shape[0]
    assert count == len(pairs)
    # Without the autotuner thread, whose wake-up an exhausted iterator's
    # deletion waited for (seconds at the end of every epoch).
    assert dataset.options().autotune.enabled is False


def test_static_shapes_give_one_shape_per_bucket(numbers_tokenizer):
    tokenizer, _ = numbers_tokenizer
    pairs = numbers_and_dates("valid")
    boundaries = bucket_boundaries(64, step=STATIC_BUCKET_STEP)  # wider: fewer programs
    dynamic = make_dataset(pairs, tokenizer, 256, 64, shuffle=False)
    static = make_dataset(pairs, tokenizer, 256, 64, shuffle=False, static_shapes=True)

    def real_pairs(dataset):
        """Every non-padding row as (source ids, labels), padding stripped;
        rows of padding must be zero on every side."""
        rows = []
        for inputs, labels in dataset.as_numpy_iterator():
            for e, d, y in zip(inputs["encoder_token_ids"], inputs["decoder_token_ids"],
                               labels):
                if y.any():
                    rows.append((tuple(e[e > 0]), tuple(y[y > 0])))
                else:
                    assert not e.any() and not d.any()
        return sorted(rows)

    shapes = set()
    for inputs, labels in static.as_numpy_iterator():
        enc, dec = inputs["encoder_token_ids"], inputs["decoder_token_ids"]
        length = enc.shape[1]
        assert length in boundaries and enc.shape == dec.shape == labels.shape
        assert enc.shape[0] == 256 // length  # full, padding rows included
        shapes.add(enc.shape)
    assert len(shapes) == len({s[1] for s in shapes})  # one shape per bucket
    # The same pairs as the dynamic batches, each once.
    static_pairs = real_pairs(static)
    assert static_pairs == real_pairs(dynamic) and len(static_pairs) == len(pairs)
    assert padding_efficiency(static) < padding_efficiency(dynamic)


@pytest.mark.parametrize("static_shapes", [False, True])
def test_batch_rows_are_a_multiple_of_the_replicas(numbers_tokenizer, static_shapes):
    tokenizer, _ = numbers_tokenizer
    pairs = numbers_and_dates("valid")
    data = make_dataset(pairs, tokenizer, 256, 64, shuffle=False,
                        static_shapes=static_shapes, batch_multiple=3)
    rows = real = 0
    for inputs, labels in data.as_numpy_iterator():
        length = max(inputs["encoder_token_ids"].shape[1], labels.shape[1])
        assert labels.shape[0] % 3 == 0
        # Bucket sizes are rounded down: never over the token budget.
        assert labels.shape[0] <= max(3, 256 // length) or not static_shapes
        rows += labels.shape[0]
        real += int((labels != 0).any(axis=1).sum())
    assert real == len(pairs) and rows - real < 3 * 64  # a few padding rows
    with pytest.raises(ValueError, match="batch_multiple"):
        make_dataset(pairs, tokenizer, batch_multiple=0)


def test_long_pairs_dropped_or_truncated(numbers_tokenizer):
    tokenizer, _ = numbers_tokenizer
    pairs = [("one", "un"), (" ".join(["seven"] * 40), " ".join(["sept"] * 40))]
    dropped = make_dataset(pairs, tokenizer, 64, max_length=16, shuffle=False)
    assert sum(x["encoder_token_ids"].shape[0] for x, _ in dropped.as_numpy_iterator()) == 1
    truncated = make_dataset(pairs, tokenizer, 64, max_length=16, long_pairs="truncate",
                             shuffle=False)
    widths = [y.shape[1] for _, y in truncated.as_numpy_iterator()]
    assert sum(1 for _ in truncated) == 2 and max(widths) <= 16
    with pytest.raises(ValueError, match="long_pairs='cut'"):
        make_dataset(pairs, tokenizer, long_pairs="cut")


def test_padding_efficiency_on_the_embedded_corpus(tmp_path):
    # With the demo's vocabulary and token budget (measured: 92.2%).
    from keras_transformer.training import TrainConfig
    from keras_transformer.data.tokenizer import DEFAULT_VOCABULARY_SIZE

    demo = TrainConfig()
    pairs = bible_en_fr("train")
    tokenizer = train_tokenizer([s for p in pairs for s in p], DEFAULT_VOCABULARY_SIZE,
                                str(tmp_path / "tokenizer.model"),
                                model_type=demo.subword_model)
    dataset = make_dataset(pairs, tokenizer, tokens_per_batch=demo.tokens_per_batch,
                           max_length=demo.max_length, shuffle=False)
    assert padding_efficiency(dataset) >= 0.90


def lm_rows(n=600, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(5, 300, size=rng.integers(1, 90)).tolist() for _ in range(n)]


@pytest.mark.parametrize("static_shapes", [False, True])
def test_causal_lm_batches_shift_each_row_by_one(static_shapes):
    rows = lm_rows()
    boundaries = bucket_boundaries(
        64, step=STATIC_BUCKET_STEP if static_shapes else 1.05)
    seen = []
    for inputs, labels in causal_lm_dataset(rows, tokens_per_batch=512, max_length=64,
                                            seed=3, static_shapes=static_shapes):
        ids, labels = inputs["token_ids"].numpy(), labels.numpy()
        assert ids.shape == labels.shape and ids.shape[1] in boundaries
        assert ids.shape[0] <= 512 // ids.shape[1]  # the token budget
        for x, y in zip(ids, labels):
            n = np.count_nonzero(y)
            # inputs [bos] a b c, labels a b c [eos]; padding after both.
            assert x[0] == BOS_ID and y[n - 1] == EOS_ID
            np.testing.assert_array_equal(x[1:n], y[: n - 1])
            assert not x[n:].any() and not y[n:].any()
            seen.append(tuple(y[: n - 1]))
        # The smallest boundary that holds the longest row.
        longest = max(np.count_nonzero(y) for y in labels)
        assert ids.shape[1] == min(b for b in boundaries if b >= longest)
    # Every row exactly once an epoch, cut to max_length - 1 of its own ids.
    assert sorted(seen) == sorted(tuple(r[:63]) for r in rows)


def test_planned_batches_order_stream_and_seed_each_batch():
    lengths = tf.constant([3, 9, 4, 8, 2, 7, 5, 6, 9, 1], tf.int64)
    kept = tf.constant([0, 1, 2, 3, 4, 5, 6, 7, 9], tf.int64)  # row 8 left out

    def planned(**kw):  # buckets (0, 4] and (4, 9], 2 rows a batch
        return planned_batches(lengths, kept, [4, 9], [2, 2],
                               lambda rows, seed: (rows, seed), seed=5, **kw)

    def read(dataset, count=-1):
        batches = [(r.numpy().tolist(), tuple(s.numpy())) for r, s in dataset.take(count)]
        return [r for r, _ in batches], [s for _, s in batches]

    in_order, _ = read(planned(shuffle=False, first_epoch=None))
    assert in_order == [[0, 2], [4, 9], [1, 3], [5, 6], [7]]
    reshuffled = planned(shuffle=True, first_epoch=None)
    first, second = read(reshuffled)[0], read(reshuffled)[0]
    for rows in (first, second):  # each batch within one bucket, every row once
        assert all(len({lengths.numpy()[i] <= 4 for i in batch}) == 1 for batch in rows)
        assert sorted(sum(rows, [])) == kept.numpy().tolist()
    assert first != second
    # A stream: 5 batches an epoch, a new order each; the run resumed at
    # epoch 3 sees the rows and seeds the one started at epoch 2 saw there.
    rows, seeds = read(planned(shuffle=True, first_epoch=2), 15)
    assert rows[:5] != rows[5:10] and len(set(seeds)) == 15
    assert read(planned(shuffle=True, first_epoch=3), 10) == (rows[5:], seeds[5:])
    # Deleting an exhausted iterator waits for the autotuner's next wake-up.
    assert reshuffled.options().autotune.enabled is False


def test_causal_lm_dataset_refuses_bad_arguments():
    with pytest.raises(ValueError, match="empty"):
        causal_lm_dataset([])
    with pytest.raises(ValueError, match="tokens_per_batch=64"):
        causal_lm_dataset([[5]], tokens_per_batch=64, max_length=128)


def _lm_pipelines():
    """The three language-model pipelines on the same rows, by name."""
    from keras_transformer.data.classification import classification_dataset, pack_pairs
    from keras_transformer.data.masking import masked_lm_dataset

    rows = lm_rows(120, seed=4)
    return {
        "causal_lm": lambda **kw: causal_lm_dataset(rows, 512, 64, seed=5, **kw),
        "masked_lm": lambda **kw: masked_lm_dataset(rows, 4, 300, 8, 64, seed=5, **kw),
        "classification": lambda **kw: classification_dataset(
            pack_pairs(rows, max_length=64), [len(r) % 3 for r in rows], 8, seed=5, **kw),
    }


def _flat(batch):
    import tensorflow as tf

    return [np.asarray(x).tolist() for x in tf.nest.flatten(batch)]


@pytest.mark.parametrize("name", ["causal_lm", "masked_lm", "classification"])
def test_lm_pipelines_stream_each_epoch_from_its_number_alone(name):
    pipeline = _lm_pipelines()[name]
    epoch = [_flat(b) for b in pipeline(shuffle=False)]
    n = len(epoch)
    from_zero = [_flat(b) for b in pipeline(shuffle=True, first_epoch=0).take(3 * n)]
    # A run resumed at epoch 2 sees what the uninterrupted run saw there.
    from_two = [_flat(b) for b in pipeline(shuffle=True, first_epoch=2).take(n)]
    assert from_two == from_zero[2 * n:]
    assert from_zero[:n] != from_zero[n:2 * n]  # a new order every epoch
    if name != "masked_lm":  # (whose labels depend on each batch's masks)
        # Every epoch holds every row once: the same labels, in another order.
        labels = lambda batches: sorted(str(row) for b in batches for row in b[-1])
        for k in range(3):
            assert labels(from_zero[k * n:(k + 1) * n]) == labels(epoch)
