"""The training progress line: a line a batch when asked, its loss that of
the logs, and its token count the real target tokens trained on."""

import io
import re

import keras
import numpy as np

from keras_transformer.training import TrainConfig
from keras_transformer.training.step_progress import StepProgress
from keras_transformer.training.train import build_model


def tiny_run():
    """A `tiny` model and 12 teacher-forcing examples, some padding."""
    rng = np.random.default_rng(0)
    inputs = {"encoder_token_ids": rng.integers(1, 50, (12, 7)),
              "decoder_token_ids": rng.integers(1, 50, (12, 6))}
    labels = rng.integers(1, 50, (12, 6))
    labels[:, 4:] = 0  # padding, not tokens
    labels[0, 1:] = 0
    keras.utils.set_random_seed(0)
    model = build_model(TrainConfig(preset="tiny"), vocabulary_size=50, jit_compile=False)
    return model, inputs, labels


def test_progress_reports_each_batch_with_the_loss_and_every_real_token():
    model, inputs, labels = tiny_run()
    log = io.StringIO()
    progress = StepProgress(total=6, time_limit=0, every_seconds=0, stream=log, epochs=2)
    history = model.fit(inputs, labels, batch_size=4, epochs=2, callbacks=[progress],
                        shuffle=False, verbose=0)
    progress.close()
    lines = log.getvalue().splitlines()
    epoch_lines = [line for line in lines if line.startswith("epoch ")]
    lines = [line for line in lines if not line.startswith("epoch ")]
    assert len(lines) == 7  # a line a batch, then the closing one
    assert [line.split(" ")[0] for line in lines] == [f"{n}/6" for n in range(1, 7)] + ["6/6"]
    real = np.count_nonzero(labels)
    assert history.history["tokens"] == [real, real]  # `TokenCount`, reset every epoch
    assert progress.trained_tokens() == 2 * real
    last_loss = float(re.search(r"loss (\d+\.\d+)", lines[-2]).group(1))
    assert abs(last_loss - history.history["loss"][-1]) < 1e-3
    assert re.search(r", [\d,]+ tokens/s, ", lines[-1])
    assert [line.split(":")[0] for line in epoch_lines] == ["epoch 1/2", "epoch 2/2"]
    for line, loss in zip(epoch_lines, history.history["loss"]):
        assert re.search(r": 3 steps in \d+\.\ds \([\d,]+ ms a step\); ", line)
        assert f"loss {loss:.4f}, " in line and f"tokens {real}" in line


def test_an_epoch_cut_short_reports_the_steps_it_ran():
    # Keras's own epoch line would report the 3 planned steps.
    class StopAfterTwo(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            self.model.stop_training = batch == 1

    model, inputs, labels = tiny_run()
    log = io.StringIO()
    progress = StepProgress(total=3, every_seconds=3600, stream=log)
    model.fit(inputs, labels, batch_size=4, epochs=1, callbacks=[StopAfterTwo(), progress],
              shuffle=False, verbose=0, validation_data=(inputs, labels))
    progress.close()
    epoch_line, closing = log.getvalue().splitlines()
    assert epoch_line.startswith("epoch 1: 2 steps in ")
    real = np.count_nonzero(labels)
    assert f"tokens {np.count_nonzero(labels[:8])}, " in epoch_line
    assert epoch_line.endswith(f"val_tokens {real}")
    assert closing.startswith("2/3 steps")
