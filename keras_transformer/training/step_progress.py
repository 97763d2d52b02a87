"""A progress line for long training runs."""

import time

import keras

from keras_transformer.progress import Progress


class StepProgress(keras.callbacks.Callback):
    """Reports a run's batches as they go (an epoch of a large corpus lasts
    hours): batches done of the run's total, the loss, real target tokens
    a second (with a `TokenCount` metric compiled in) and the ETA within
    the time budget; and a line per epoch with its batches, their time and
    the epoch's logs. It serves every `fit` of one run; `close` ends it.

    Keras's own line per epoch (`verbose=2`) reports the epoch's planned
    batches, and their time per step from them, even when the time budget
    cut the epoch short; this one counts the batches that ran.

    Args:
        total: int, the batches the run will train on at most.
        time_limit: float, the run's time budget in seconds (0: none).
        quiet: bool, report nothing.
        epochs: int, the run's epochs, shown as `epoch E/epochs` (0: `epoch E`).
        every_seconds, stream: as `Progress`'s.
    """

    def __init__(self, total, time_limit=0.0, quiet=False, epochs=0, every_seconds=30.0,
                 stream=None):
        super().__init__()
        self.settings = dict(total=total, unit="steps", quiet=quiet,
                             every_seconds=every_seconds, stream=stream,
                             time_limit=time_limit)
        self.epochs = epochs
        self.progress = None  # from the first `fit`'s start
        self.tokens = 0.0  # of the epochs ended
        self.logs = {}
        self.epoch_batches = 0
        self.epoch_start = self.last_batch_end = 0.0

    def on_train_begin(self, logs=None):
        if self.progress is None:
            self.progress = Progress(**self.settings)

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch_batches = 0
        self.epoch_start = self.last_batch_end = time.monotonic()

    def on_train_batch_end(self, batch, logs=None):
        self.logs = logs or {}
        self.epoch_batches += 1
        self.last_batch_end = time.monotonic()
        self.progress.advance(1, self._detail)

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        self.tokens += float(logs.get("tokens", 0.0))
        self.logs = {}
        # The batches' time, without the validation after them.
        seconds = self.last_batch_end - self.epoch_start
        steps = max(self.epoch_batches, 1)
        values = ", ".join(f"{name} {float(value):,.0f}" if name.endswith("tokens")
                           else f"{name} {float(value):.4f}" for name, value in logs.items())
        self.progress.note(
            f"epoch {epoch + 1}{f'/{self.epochs}' if self.epochs else ''}: "
            f"{self.epoch_batches:,} steps in {seconds:.1f}s "
            f"({seconds / steps * 1e3:,.0f} ms a step); {values}")

    def close(self):
        if self.progress is not None:
            self.progress.close(self._detail)

    def trained_tokens(self):
        """The real target tokens trained on so far (0 without a
        `TokenCount` metric)."""
        return self.tokens + float(self.logs.get("tokens", 0.0))

    def _detail(self):
        """`loss L` and `T tokens/s` from the last batch's logs."""
        detail = [f"loss {float(self.logs['loss']):.3f}"] if "loss" in self.logs else []
        tokens = self.trained_tokens()
        if tokens:
            elapsed = max(time.monotonic() - self.progress.start, 1e-9)
            detail.append(f"{tokens / elapsed:,.0f} tokens/s")
        return detail
