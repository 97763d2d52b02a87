"""The training program end to end on a small user corpus: checkpoints,
resume, averaging, the saved translator."""

import csv
import os

import keras
import numpy as np
import pytest

from keras_transformer.data.embedded import numbers_and_dates
from keras_transformer.training import TrainConfig, average_checkpoints, list_checkpoints, train
from keras_transformer.translator import Translator


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("run")
    corpus = root / "numbers.tsv"
    corpus.write_text("".join(f"{en}\t{fr}\n" for en, fr in numbers_and_dates(size=400)))
    config = TrainConfig(
        corpus=str(corpus), run_dir=str(root / "run"), preset="tiny",
        vocabulary_size=200, tokens_per_batch=512, max_length=32, epochs=1,
        max_minutes=0, warmup_steps=50, eval_sentences=4, average_last=2,
        beam_size=2,
    )
    first = train(config)
    config.epochs, config.resume = 2, True
    second = train(config)
    return config, first, second


def test_resume_continues_at_the_right_step(run):
    config, first, second = run
    assert second["steps"] == 2 * first["steps"] > 0
    with open(os.path.join(config.run_dir, "history.csv")) as f:
        assert [row["epoch"] for row in csv.DictReader(f)] == ["0", "1"]
    checkpoints = list_checkpoints(os.path.join(config.run_dir, "checkpoints"))
    assert [epoch for epoch, _ in checkpoints] == [1, 2]
    for key in ("bleu", "chrf", "padding_efficiency"):
        assert 0 <= second[key] <= 100


def test_average_is_the_mean_of_the_checkpoints(run):
    config, _, _ = run
    paths = [p for _, p in list_checkpoints(os.path.join(config.run_dir, "checkpoints"))]
    averaged = average_checkpoints(paths)
    a, b = (keras.saving.load_model(p, compile=False).get_weights() for p in paths)
    for got, x, y in zip(averaged.get_weights(), a, b):
        np.testing.assert_allclose(got, (x + y) / 2, atol=1e-6)
    assert not np.allclose(a[0], b[0])  # the two checkpoints really differ


def test_saved_translator_handles_bad_input(run):
    config, _, _ = run
    translator = Translator.load(config.run_dir, beam_size=2, max_extra_length=5,
                                 max_source_length=8)
    sentences = ["", "   ", "twelve", "☃ ☃ ☃", "one two three four five six seven eight nine"]
    with pytest.warns(UserWarning, match="max_source_length=8"):
        out = translator.translate(sentences)
    assert len(out) == 5 and out[0] == out[1] == ""
    assert all(isinstance(s, str) for s in out)
    assert translator.translate(["twelve"]) == [out[2]]  # batching changes nothing
    with pytest.raises(TypeError, match="list of strings"):
        translator.translate("twelve")
