"""The training progress line: a line a batch when asked, its loss that of
the logs, and its token count the real target tokens trained on."""

import io
import re

import keras
import numpy as np

from keras_transformer.training import TrainConfig
from keras_transformer.training.step_progress import StepProgress
from keras_transformer.training.train import build_model


def test_progress_reports_each_batch_with_the_loss_and_every_real_token():
    rng = np.random.default_rng(0)
    inputs = {"encoder_token_ids": rng.integers(1, 50, (12, 7)),
              "decoder_token_ids": rng.integers(1, 50, (12, 6))}
    labels = rng.integers(1, 50, (12, 6))
    labels[:, 4:] = 0  # padding, not tokens
    labels[0, 1:] = 0
    keras.utils.set_random_seed(0)
    model = build_model(TrainConfig(preset="tiny"), vocabulary_size=50, jit_compile=False)
    log = io.StringIO()
    progress = StepProgress(total=6, time_limit=0, every_seconds=0, stream=log)
    history = model.fit(inputs, labels, batch_size=4, epochs=2, callbacks=[progress],
                        shuffle=False, verbose=0)
    progress.close()
    lines = log.getvalue().splitlines()
    assert len(lines) == 7  # a line a batch, then the closing one
    assert [line.split(" ")[0] for line in lines] == [f"{n}/6" for n in range(1, 7)] + ["6/6"]
    real = np.count_nonzero(labels)
    assert history.history["tokens"] == [real, real]  # `TokenCount`, reset every epoch
    assert progress.trained_tokens() == 2 * real
    last_loss = float(re.search(r"loss (\d+\.\d+)", lines[-2]).group(1))
    assert abs(last_loss - history.history["loss"][-1]) < 1e-3
    assert re.search(r", [\d,]+ tokens/s, ", lines[-1])
