"""`keras-transformer prepare`: tokenize a corpus once into sharded TFRecord
files (`keras_transformer.data.prepared`), for corpora larger than memory.

Three reads of the corpus, each a line at a time: one counts its pairs and
chooses the held-out ones; one samples the sentences SentencePiece trains on;
one tokenizes the training pairs, spread at random over the shards. Each
shard is then shuffled on its own, so memory holds one shard at most.
"""

import dataclasses
import itertools
import json
import os
import random
import time

import numpy as np

from keras_transformer.checks import check_fields, check_positive_int
from keras_transformer.data.corpora import held_out_count, shipped_splits
from keras_transformer.data.prepared import (
    FORMAT,
    HELD_OUT_FILES,
    MANIFEST_FILE,
    encode_pair,
    shard_name,
)
from keras_transformer.data.readers import CorpusReport, iter_corpus, read_corpus
from keras_transformer.data.tokenizer import (
    DEFAULT_VOCABULARY_SIZE, TOKENIZER_FILE, train_tokenizer)
from keras_transformer.progress import Progress
from keras_transformer.training.options import (
    CorpusOptions, SubwordModel, option, subword_model_option)

TOKENIZE_CHUNK = 4096  # pairs tokenized together, on every core


@dataclasses.dataclass
class PrepareConfig(CorpusOptions):
    """What `prepare` reads and writes; the flags come from these fields."""

    corpus: str = option("bible", "bible or numbers (shipped), a TSV, JSONL or Moses file, "
                                  "or tfds:NAME:SPLIT")
    output_dir: str = option("prepared/bible_en_fr", "a new directory for the shards, the "
                                                     "tokenizer and the manifest")
    # The sets a paper reports on (WMT: newstest2013 and newstest2014).
    valid_corpus: str | None = option(
        None, "the validation set, read as --corpus is; with --test-corpus, every pair of "
              "--corpus trains (default: pairs held out from --corpus)")
    test_corpus: str | None = option(None, "the test set, with --valid-corpus")
    # The paper: about 37,000 for WMT EN-DE.
    vocabulary_size: int = option(DEFAULT_VOCABULARY_SIZE, "pieces of the shared "
                                                           "vocabulary")
    subword_model: SubwordModel = subword_model_option()
    tokenizer_sample: int = option(1_000_000, "sentences (both sides) the tokenizer trains "
                                              "on, drawn at random")
    # A shard is shuffled in memory: about 20 MB.
    pairs_per_shard: int = option(100_000, "pairs a shard")
    seed: int = option(0, "the seed of the held-out pairs, the tokenizer's sample and the "
                          "shards' order")
    quiet: bool = option(False, "no progress lines")


def prepare(config):
    """Runs the program; returns the manifest (a dict)."""
    check_fields(config)  # the subword model is one of its choices
    check_positive_int("tokenizer_sample", config.tokenizer_sample)
    check_positive_int("pairs_per_shard", config.pairs_per_shard)
    check_positive_int("vocabulary_size", config.vocabulary_size)
    if (config.valid_corpus is None) != (config.test_corpus is None):
        raise ValueError(
            "--valid-corpus and --test-corpus go together; received only "
            + ("--valid-corpus" if config.valid_corpus else "--test-corpus"))
    if os.path.exists(config.output_dir) and os.listdir(config.output_dir):
        raise ValueError(f"{config.output_dir} exists and is not empty; prepare into a new "
                         "directory (--output-dir), or delete it")
    start = time.monotonic()
    train_pairs, count, valid, test, report = _splits(config)
    os.makedirs(config.output_dir, exist_ok=True)
    for split, pairs in (("valid", valid), ("test", test)):
        with open(os.path.join(config.output_dir, HELD_OUT_FILES[split]), "w",
                  encoding="utf-8") as f:
            f.writelines(f"{source}\t{target}\n" for source, target in pairs)

    sample = _sample(train_pairs(), config.tokenizer_sample // 2 or 1, config.seed)
    texts = [side for pair in sample for side in pair]
    _say(config, f"training SentencePiece ({config.vocabulary_size} pieces) on "
                 f"{len(texts):,} sentences")
    tokenizer = train_tokenizer(texts, config.vocabulary_size,
                                os.path.join(config.output_dir, TOKENIZER_FILE),
                                model_type=config.subword_model)
    sentences = len(texts)
    del sample, texts

    shards = max(1, -(-count // config.pairs_per_shard))
    sizes, lengths = _write_shards(config, train_pairs(), count, shards)
    manifest = {
        "format": FORMAT, "corpus": config.corpus, "target_path": config.target_path,
        "source_language": config.source_language,
        "target_language": config.target_language,
        "vocabulary_size": int(tokenizer.vocabulary_size()), "tokenizer": TOKENIZER_FILE,
        "subword_model": config.subword_model,
        "tokenizer_sentences": sentences,
        "seed": config.seed,
        "pairs": {"read": report.read, "dropped_empty": report.dropped_empty,
                  "train": count, "valid": len(valid), "test": len(test)},
        "shards": [{"file": shard_name(i, shards), "pairs": n} for i, n in enumerate(sizes)],
        "lengths": {str(length): lengths[length] for length in sorted(lengths)},
        "seconds": round(time.monotonic() - start, 1),
    }
    with open(os.path.join(config.output_dir, MANIFEST_FILE), "w") as f:
        json.dump(manifest, f, indent=1)
    _say(config, f"prepared {count:,} training pairs in {shards} shard(s), "
                 f"{len(valid)} valid, {len(test)} test: {config.output_dir}")
    return manifest


def _splits(config):
    """`(train_pairs, count, valid, test, report)`: a function returning a
    fresh iterator over the training pairs, their count, the held-out pairs
    as lists, and the reader's `CorpusReport`. A user's corpus holds out
    `held_out_count` pairs for each of validation and test, chosen with the
    seed, unless the held-out sets are given."""
    given = None
    if config.valid_corpus is not None:  # read first: a bad path fails before a pass
        given = [read_corpus(spec, None, config.source_language, config.target_language)[0]
                 for spec in (config.valid_corpus, config.test_corpus)]
    shipped = shipped_splits(config.corpus, config.target_language)
    if shipped:
        train, valid, test = shipped
        report = CorpusReport(config.corpus, read=len(train), kept=len(train))
        return (lambda: iter(train)), len(train), *(given or (valid, test)), report

    def read(report=None):
        return iter_corpus(config.corpus, config.target_path, config.source_language,
                           config.target_language, report=report)

    report = CorpusReport(config.corpus)
    total = sum(1 for _ in read(report))
    print(report)
    if given:
        return read, total, *given, report
    held_out = held_out_count(config.corpus, total, "usable pairs")
    chosen = random.Random(config.seed).sample(range(total), 2 * held_out)
    roles = dict.fromkeys(chosen[:held_out], "valid") | dict.fromkeys(chosen[held_out:],
                                                                      "test")
    valid, test = [], []
    for index, pair in enumerate(read()):
        if index in roles:
            (valid if roles[index] == "valid" else test).append(pair)

    def train_pairs():
        return (pair for index, pair in enumerate(read()) if index not in roles)

    return train_pairs, total - len(roles), valid, test, report


def _sample(pairs, size, seed):
    """`size` of `pairs` drawn uniformly at random in one pass (reservoir
    sampling), so the corpus never sits in memory."""
    rng = random.Random(seed)
    sample = []
    for index, pair in enumerate(pairs):
        if index < size:
            sample.append(pair)
        else:
            slot = rng.randrange(index + 1)
            if slot < size:
                sample[slot] = pair
    return sample


def _write_shards(config, pairs, count, shards):
    """Tokenizes `pairs` (`count` of them) into `shards` TFRecord files,
    each pair in a shard drawn at random, then shuffles each shard on its
    own; returns `(pairs per shard, {length: pairs})`."""
    import sentencepiece as spm
    import tensorflow as tf

    processor = spm.SentencePieceProcessor(
        model_file=os.path.join(config.output_dir, TOKENIZER_FILE))
    rng = np.random.default_rng(config.seed)
    paths = [os.path.join(config.output_dir, shard_name(i, shards)) for i in range(shards)]
    writers = [tf.io.TFRecordWriter(path + ".tmp") for path in paths]
    sizes, lengths = [0] * shards, {}
    progress = Progress(count, "pairs", quiet=config.quiet)
    threads = os.cpu_count() or 1
    pairs = iter(pairs)
    while chunk := list(itertools.islice(pairs, TOKENIZE_CHUNK)):
        sources = processor.encode([source for source, _ in chunk], num_threads=threads)
        targets = processor.encode([target for _, target in chunk], num_threads=threads)
        for source, target, shard in zip(sources, targets, rng.integers(shards, size=len(chunk))):
            writers[shard].write(encode_pair(source, target))
            sizes[shard] += 1
            length = max(len(source), len(target))
            lengths[length] = lengths.get(length, 0) + 1
        progress.advance(len(chunk))
    progress.close()
    for writer in writers:
        writer.close()
    for path in paths:
        records = list(tf.data.TFRecordDataset(path + ".tmp").as_numpy_iterator())
        with tf.io.TFRecordWriter(path) as writer:
            for index in rng.permutation(len(records)):
                writer.write(records[index])
        os.remove(path + ".tmp")
    return sizes, lengths


def _say(config, message):
    if not config.quiet:
        print(message, flush=True)
