"""`prepare` and the streamed pipeline of a prepared corpus: nothing lost,
the ids keras-hub's tokenizer gives, the batches `make_dataset` gives, and
epochs rebuilt from their number."""

import collections
import json
import os
import shutil

import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

from keras_transformer.data.corpora import numbers_and_dates
from keras_transformer.data.pipeline import (
    _streamed,
    count_batches,
    make_dataset,
    prepared_dataset,
)
from keras_transformer.data.prepared import (
    MANIFEST_FILE,
    decode_pairs,
    read_manifest,
    shard_paths,
)
from keras_transformer.data.readers import read_corpus
from keras_transformer.data.tokenizer import load_tokenizer, token_ids
from keras_transformer.training.prepare import PrepareConfig, prepare
from tests.helpers import subword_model

PAIRS = 3000  # 150 held out for each of valid and test (5%), 2,700 in 5 shards


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A prepared TSV corpus (with one empty line), its pairs, and the
    training pairs: the corpus less the held-out ones."""
    root = tmp_path_factory.mktemp("prepared")
    pairs = numbers_and_dates("train", size=PAIRS)
    path = root / "pairs.tsv"
    lines = [f"{source}\t{target}\n" for source, target in pairs]
    path.write_text("".join(lines[:10] + ["\t\n"] + lines[10:]))
    output = str(root / "prepared")
    manifest = prepare(PrepareConfig(
        corpus=str(path), output_dir=output, vocabulary_size=300, tokenizer_sample=1000,
        pairs_per_shard=600, quiet=True))
    held_out = [read_corpus(os.path.join(output, f"{split}.tsv"))[0]
                for split in ("valid", "test")]
    train = collections.Counter(pairs)
    for split in held_out:
        train.subtract(split)
    return output, manifest, pairs, held_out, list(train.elements())


def examples(dataset):
    """The multiset of `(source ids, target ids)` in a dataset's batches,
    without the rows of padding that fill a static shape."""
    found = collections.Counter()
    for inputs, labels in dataset.as_numpy_iterator():
        for source, target in zip(inputs["encoder_token_ids"], labels):
            if source.any():
                found[tuple(source[source > 0]), tuple(target[target > 0])] += 1
    return found


def test_prepare_holds_out_tokenizes_and_counts_every_pair(corpus):
    output, manifest, pairs, (valid, test), train = corpus
    with open(os.path.join(output, MANIFEST_FILE)) as f:
        assert json.load(f) == manifest
    assert manifest["pairs"] == {"read": PAIRS + 1, "dropped_empty": 1, "train": 2700,
                                 "valid": 150, "test": 150}
    assert len(valid) == len(test) == 150
    assert sorted(train + valid + test) == sorted(pairs)
    assert manifest["tokenizer_sentences"] == 1000
    assert manifest["subword_model"] == "bpe"  # the default
    assert subword_model(os.path.join(output, "tokenizer.model")) == "BPE"

    # The shards hold exactly the training pairs, as keras-hub's tokenizer
    # reads them, spread over 5 shards, each in an order not the corpus's.
    tokenizer = load_tokenizer(os.path.join(output, "tokenizer.model"))
    expected = collections.Counter(zip(
        map(tuple, token_ids(tokenizer, [s for s, _ in train])),
        map(tuple, token_ids(tokenizer, [t for _, t in train]))))
    found, position = collections.Counter(), {pair: i for i, pair in enumerate(pairs)}
    ids_to_pair = {ids: pair for ids, pair in zip(
        zip(map(tuple, token_ids(tokenizer, [s for s, _ in pairs])),
            map(tuple, token_ids(tokenizer, [t for _, t in pairs]))), pairs)}
    paths = shard_paths(output, manifest)
    assert len(paths) == 5
    for path, shard in zip(paths, manifest["shards"]):
        records = list(tf.data.TFRecordDataset(path).batch(10_000).map(decode_pairs)
                       .unbatch().as_numpy_iterator())
        assert len(records) == shard["pairs"] > 400
        shard_pairs = [(tuple(s), tuple(t)) for s, t in records]
        found.update(shard_pairs)
        order = [position[ids_to_pair[ids]] for ids in shard_pairs]
        assert order != sorted(order)
    assert found == expected
    assert manifest["lengths"] == {str(k): v for k, v in sorted(collections.Counter(
        max(len(s), len(t)) for s, t in expected.elements()).items())}


@pytest.mark.parametrize("long_pairs, static_shapes, batch_multiple, window",
                         [("drop", False, 1, 2**16), ("truncate", True, 2, 100)])
def test_a_prepared_corpus_gives_make_datasets_batches(corpus, long_pairs, static_shapes,
                                                       batch_multiple, window):
    output, manifest, _, _, train = corpus
    tokenizer = load_tokenizer(os.path.join(output, "tokenizer.model"))
    options = dict(tokens_per_batch=256, max_length=12, long_pairs=long_pairs,
                   static_shapes=static_shapes, batch_multiple=batch_multiple)
    batches, kept = count_batches(manifest["lengths"], **options)
    assert (kept < 2700) == (long_pairs == "drop")  # max_length 12 drops some

    in_memory = make_dataset(train, tokenizer, shuffle=False, **options)
    streamed = prepared_dataset(output, shuffle=False, window=window, **options)
    assert sum(1 for _ in streamed) == sum(1 for _ in in_memory) == batches
    assert examples(streamed) == examples(in_memory)
    assert sum(examples(streamed).values()) == kept


def test_a_prepared_stream_rebuilds_any_epoch_and_position(corpus):
    output, manifest, *_ = corpus
    batches, _ = count_batches(manifest["lengths"], 256, 24)

    def labels(dataset, count):
        return [y.tolist() for _, y in dataset.take(count).as_numpy_iterator()]

    whole = labels(prepared_dataset(output, 256, 24, repeat=True, window=1000), 2 * batches)
    resumed = labels(prepared_dataset(output, 256, 24, repeat=True, window=1000,
                                      first_epoch=1).skip(5), batches - 5)
    assert resumed == whole[batches + 5:]
    epochs = [whole[:batches], whole[batches:]]
    assert epochs[0] != epochs[1]  # another order each epoch
    multisets = [collections.Counter(tuple(t for t in row if t) for batch in epoch
                                     for row in batch) for epoch in epochs]
    assert multisets[0] == multisets[1]
    other_seed = labels(prepared_dataset(output, 256, 24, repeat=True, seed=1), batches)
    assert other_seed != epochs[0]


@settings(max_examples=25, deadline=None)
@given(lengths=st.lists(st.tuples(st.integers(1, 40), st.integers(1, 40)), min_size=1,
                        max_size=200),
       max_length=st.integers(8, 40), extra_tokens=st.integers(0, 300),
       long_pairs=st.sampled_from(["drop", "truncate"]), static_shapes=st.booleans(),
       batch_multiple=st.integers(1, 3), window=st.integers(1, 80), shuffle=st.booleans())
def test_count_batches_equals_the_batches_of_a_pass(lengths, max_length, extra_tokens,
                                                    long_pairs, static_shapes,
                                                    batch_multiple, window, shuffle):
    options = dict(tokens_per_batch=max_length + extra_tokens, max_length=max_length,
                   long_pairs=long_pairs, static_shapes=static_shapes,
                   batch_multiple=batch_multiple)
    pairs = tf.data.Dataset.from_tensor_slices(
        (tf.ragged.constant([[5] * s for s, _ in lengths]),
         tf.ragged.constant([[6] * t for _, t in lengths])))
    # Windows of any size: the rows short of a batch wait for the next one.
    dataset = _streamed(lambda epoch: pairs.ragged_batch(window), shuffle=shuffle, seed=0,
                        first_epoch=None, **options)
    histogram = collections.Counter(max(s, t) for s, t in lengths)
    batches, kept = count_batches(histogram, **options)
    assert sum(1 for _ in dataset) == batches
    assert sum(examples(dataset).values()) == kept


def test_prepare_refuses_a_used_directory_and_a_tiny_corpus(corpus, tmp_path):
    output, *_ = corpus
    before = sorted(os.listdir(output))
    with pytest.raises(ValueError, match="exists and is not empty"):
        prepare(PrepareConfig(corpus="numbers", output_dir=output, quiet=True))
    assert sorted(os.listdir(output)) == before
    tiny = tmp_path / "tiny.tsv"
    tiny.write_text("a\tb\n" * 99)
    with pytest.raises(ValueError, match="99 usable pairs; at least 100"):
        prepare(PrepareConfig(corpus=str(tiny), output_dir=str(tmp_path / "out"), quiet=True))
    assert not (tmp_path / "out").exists()


def test_a_damaged_prepared_corpus_is_refused(corpus, tmp_path):
    output, manifest, *_ = corpus
    copy = tmp_path / "copy"
    shutil.copytree(output, copy)
    os.remove(copy / manifest["shards"][1]["file"])
    with pytest.raises(FileNotFoundError, match=manifest["shards"][1]["file"]):
        read_manifest(str(copy))
    (copy / MANIFEST_FILE).write_text(json.dumps({"format": "other"}))
    with pytest.raises(ValueError, match="not a manifest of format"):
        read_manifest(str(copy))


def test_given_held_out_sets_are_written_and_every_corpus_pair_trains(tmp_path):
    pairs = numbers_and_dates("train", size=400)
    (tmp_path / "train.tsv").write_text("".join(f"{s}\t{t}\n" for s, t in pairs))
    held_out = {}
    for split, size in (("newstest2013", 30), ("newstest2014", 40)):  # Moses files
        chosen = numbers_and_dates("test", size=size)
        for side, language in ((0, "en"), (1, "fr")):
            (tmp_path / f"{split}.{language}").write_text(
                "".join(pair[side] + "\n" for pair in chosen))
        held_out[split] = chosen
    output = str(tmp_path / "prepared")
    manifest = prepare(PrepareConfig(
        corpus=str(tmp_path / "train.tsv"), output_dir=output, vocabulary_size=200,
        valid_corpus=str(tmp_path / "newstest2013"), test_corpus=str(tmp_path / "newstest2014"),
        subword_model="unigram", pairs_per_shard=150, quiet=True))
    assert manifest["subword_model"] == "unigram"
    assert subword_model(os.path.join(output, "tokenizer.model")) == "UNIGRAM"
    assert manifest["pairs"] | {"read": 0} == {"read": 0, "dropped_empty": 0, "train": 400,
                                               "valid": 30, "test": 40}
    assert read_corpus(os.path.join(output, "valid.tsv"))[0] == held_out["newstest2013"]
    assert read_corpus(os.path.join(output, "test.tsv"))[0] == held_out["newstest2014"]
    tokenizer = load_tokenizer(os.path.join(output, "tokenizer.model"))
    streamed = collections.Counter(
        (tuple(s), tuple(t)) for path in shard_paths(output, manifest)
        for s, t in tf.data.TFRecordDataset(path).batch(10_000).map(decode_pairs)
        .unbatch().as_numpy_iterator())
    expected = collections.Counter(zip(
        map(tuple, token_ids(tokenizer, [s for s, _ in pairs])),
        map(tuple, token_ids(tokenizer, [t for _, t in pairs]))))
    assert streamed == expected


def test_held_out_sets_go_together_and_a_missing_one_fails_before_any_work(tmp_path):
    output = tmp_path / "out"
    with pytest.raises(ValueError, match="--valid-corpus and --test-corpus go together"):
        prepare(PrepareConfig(corpus="numbers", output_dir=str(output),
                              valid_corpus="newstest2013.tsv", quiet=True))
    with pytest.raises(FileNotFoundError, match="nowhere.tsv"):
        prepare(PrepareConfig(corpus="numbers", output_dir=str(output),
                              valid_corpus=str(tmp_path / "nowhere.tsv"),
                              test_corpus=str(tmp_path / "nowhere.tsv"), quiet=True))
    assert not output.exists()
