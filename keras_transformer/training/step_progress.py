"""A progress line for long training runs."""

import time

import keras

from keras_transformer.progress import Progress


class StepProgress(keras.callbacks.Callback):
    """Reports a run's batches as they go, between Keras's lines per epoch
    (an epoch of a large corpus lasts hours): batches done of the run's
    total, the loss, real target tokens a second (with a `TokenCount`
    metric compiled in) and the ETA within the time budget. It serves
    every `fit` of one run; `close` ends it.

    Args:
        total: int, the batches the run will train on at most.
        time_limit: float, the run's time budget in seconds (0: none).
        quiet: bool, report nothing.
        every_seconds, stream: as `Progress`'s.
    """

    def __init__(self, total, time_limit=0.0, quiet=False, every_seconds=30.0,
                 stream=None):
        super().__init__()
        self.settings = dict(total=total, unit="steps", quiet=quiet,
                             every_seconds=every_seconds, stream=stream,
                             time_limit=time_limit)
        self.progress = None  # from the first `fit`'s start
        self.tokens = 0.0  # of the epochs ended
        self.logs = {}

    def on_train_begin(self, logs=None):
        if self.progress is None:
            self.progress = Progress(**self.settings)

    def on_train_batch_end(self, batch, logs=None):
        self.logs = logs or {}
        self.progress.advance(1, self._detail)

    def on_epoch_end(self, epoch, logs=None):
        self.tokens += float((logs or {}).get("tokens", 0.0))
        self.logs = {}

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
