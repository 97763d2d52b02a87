"""`prepare`, then `train` streaming the prepared corpus, from the command
line: the epoch's batches counted from the manifest, the tokenizer carried
over, resume, and the refusals."""

import csv
import filecmp
import json
import os
import re

import pytest

from keras_transformer import cli
from keras_transformer.data.corpora import numbers_and_dates
from keras_transformer.data.pipeline import count_batches
from keras_transformer.data.prepared import read_manifest
from keras_transformer.training import TrainConfig, train


@pytest.fixture(scope="module")
def prepared_run(tmp_path_factory):
    """3,000 number pairs prepared in 3 shards; 2 epochs of `train` on
    them, then a third with --resume."""
    root = tmp_path_factory.mktemp("prepared_run")
    corpus = root / "numbers.tsv"
    corpus.write_text("".join(f"{en}\t{fr}\n" for en, fr in numbers_and_dates(size=3000)))
    data = str(root / "data")
    assert cli.main(["prepare", "--corpus", str(corpus), "--output-dir", data,
                     "--vocabulary-size", "300", "--pairs-per-shard", "1000", "--quiet"]) == 0
    config = TrainConfig(
        corpus=data, run_dir=str(root / "run"), preset="tiny", tokens_per_batch=1024,
        max_length=32, epochs=2, max_minutes=0, warmup_steps=50, eval_sentences=50,
        beam_size=2, alpha=0.6, peak_learning_rate=2e-3)
    first = train(config)
    config.epochs, config.resume = 3, True
    second = train(config)
    return config, first, second


def test_train_streams_a_prepared_corpus(prepared_run):
    config, first, second = prepared_run
    manifest = read_manifest(config.corpus)
    assert len(manifest["shards"]) == 3
    batches, kept = count_batches(manifest["lengths"], 1024, 32)
    assert kept == manifest["pairs"]["train"] == 2700  # 5% + 5% held out; none too long
    assert first["steps"] == 2 * batches and second["steps"] == 3 * batches
    with open(os.path.join(config.run_dir, "history.csv")) as f:
        losses = [float(row["loss"]) for row in csv.DictReader(f)]
    assert len(losses) == 3 and losses[2] < losses[1] < losses[0]
    assert filecmp.cmp(os.path.join(config.run_dir, "tokenizer.model"),
                       os.path.join(config.corpus, "tokenizer.model"), shallow=False)
    assert first["test_sentences"] == 50
    assert first["padding_efficiency"] is None  # not measured: no pass before the first step
    for results in (first, second):
        assert 0 < results["seconds_to_first_step"] < 60 * results["training_minutes"] + 60
        assert results["training_peak_memory_mib"] > 100


def test_a_prepared_corpus_keeps_its_vocabulary(prepared_run, tmp_path):
    config, *_ = prepared_run
    run_dir = tmp_path / "other"
    with pytest.raises(ValueError, match=re.escape(
            f"--vocabulary-size 400: {config.corpus} is tokenized with 300 pieces")):
        train(TrainConfig(corpus=config.corpus, run_dir=str(run_dir), vocabulary_size=400))
    assert not run_dir.exists()


def test_resume_refuses_a_corpus_prepared_again(prepared_run, tmp_path):
    config, *_ = prepared_run
    data = tmp_path / "data"
    corpus = tmp_path / "numbers.tsv"
    corpus.write_text("".join(f"{en}\t{fr}\n" for en, fr in numbers_and_dates(size=2000,
                                                                               seed=5)))
    assert cli.main(["prepare", "--corpus", str(corpus), "--output-dir", str(data),
                     "--vocabulary-size", "300", "--quiet"]) == 0
    # The run's saved corpus now names the new directory, as if prepared
    # again in place: its tokenizer differs, so its ids would.
    saved = os.path.join(config.run_dir, "train_config.json")
    with open(saved) as f:
        settings = json.load(f)
    before = {name: os.path.getmtime(os.path.join(config.run_dir, name))
              for name in os.listdir(config.run_dir)}
    try:
        with open(saved, "w") as f:
            json.dump(settings | {"corpus": str(data)}, f)
        resumed = TrainConfig(**(vars(config) | {"corpus": str(data), "epochs": 4}))
        with pytest.raises(ValueError, match="differs from .*was the corpus prepared again"):
            train(resumed)
        after = {name: os.path.getmtime(os.path.join(config.run_dir, name))
                 for name in os.listdir(config.run_dir) if name != "train_config.json"}
        assert after == {k: v for k, v in before.items() if k != "train_config.json"}
    finally:
        with open(saved, "w") as f:
            json.dump(settings, f)
