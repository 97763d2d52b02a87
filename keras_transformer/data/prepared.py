"""A prepared corpus: sentence pairs tokenized once into sharded TFRecord
files, for corpora larger than memory (`keras-transformer prepare` writes
one, `train --corpus DIR` streams it).

A prepared directory holds:
- `tokenizer.model`, the shared SentencePiece vocabulary;
- `train-SSSSS-of-NNNNN.tfrecord`, the training pairs as `tf.train.Example`s
  with int64 features "inputs" and "targets" (token ids without bos/eos,
  the features tensor2tensor writes), each shard a random part of the
  corpus in random order;
- `valid.tsv` and `test.tsv`, the held-out pairs as text, for BLEU;
- `manifest.json` (written last: a directory without it is not prepared),
  with the counts, the shards and the pairs' length histogram, from which
  `train` counts an epoch's batches without reading the shards.
"""

import json
import os

MANIFEST_FILE = "manifest.json"
FORMAT = "keras_transformer.prepared/1"
HELD_OUT_FILES = {"valid": "valid.tsv", "test": "test.tsv"}


def shard_name(index, count):
    return f"train-{index:05d}-of-{count:05d}.tfrecord"


def is_prepared(path):
    """Whether `path` is a prepared corpus's directory."""
    return os.path.isfile(os.path.join(path, MANIFEST_FILE))


def read_manifest(directory):
    """The manifest of the prepared corpus in `directory`, once its shards,
    tokenizer and held-out files are known to be there.

    Returns:
        A dict: "vocabulary_size", "pairs" (counts by split), "shards" (a
        list of `{"file", "pairs"}`), "lengths" (`{length: pairs}`, a pair's
        length being its longer side in tokens) and the settings it was
        prepared with.
    """
    path = os.path.join(directory, MANIFEST_FILE)
    try:
        with open(path) as f:
            manifest = json.load(f)
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: not a manifest ({error.msg}); prepare the corpus again") \
            from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ValueError(f"{path}: not a manifest of format {FORMAT!r}; prepare the corpus "
                         "again with this version")
    files = [shard["file"] for shard in manifest["shards"]] + [
        manifest["tokenizer"], *HELD_OUT_FILES.values()]
    missing = [name for name in files if not os.path.isfile(os.path.join(directory, name))]
    if missing:
        raise FileNotFoundError(
            f"{directory}: the prepared corpus lacks {', '.join(missing)}; prepare it again")
    manifest["lengths"] = {int(length): count for length, count in manifest["lengths"].items()}
    return manifest


def encode_pair(source_ids, target_ids):
    """One pair of token id lists as a serialized `tf.train.Example`."""
    import tensorflow as tf

    def ids(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))

    return tf.train.Example(features=tf.train.Features(feature={
        "inputs": ids(source_ids), "targets": ids(target_ids)})).SerializeToString()


def decode_pairs(records):
    """Serialized examples (a string vector) --> `(source_ids,
    target_ids)`, int32 ragged `(batch, None)`."""
    import tensorflow as tf

    features = {name: tf.io.RaggedFeature(tf.int64) for name in ("inputs", "targets")}
    parsed = tf.io.parse_example(records, features)
    return tf.cast(parsed["inputs"], tf.int32), tf.cast(parsed["targets"], tf.int32)


def shard_paths(directory, manifest):
    return [os.path.join(directory, shard["file"]) for shard in manifest["shards"]]
