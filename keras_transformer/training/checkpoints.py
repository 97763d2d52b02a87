"""Checkpoints written atomically, and checkpoint averaging (section 6.1)."""

import glob
import os
import re
import time

import keras
import numpy as np

from keras_transformer.model_files import check_model_file, load_model_file

# Named by the batches trained on: a run's position in its data stream.
CHECKPOINT_PATTERN = "ckpt-{batches:09d}.keras"


def list_checkpoints(directory):
    """The checkpoints in `directory`, oldest first, as `(batches, path)`."""
    found = []
    for path in glob.glob(os.path.join(directory, "ckpt-*.keras")):
        match = re.fullmatch(r"ckpt-(\d+)\.keras", os.path.basename(path))
        if match:
            found.append((int(match.group(1)), path))
    return sorted(found)


class AtomicCheckpoint(keras.callbacks.Callback):
    """Saves the whole model (weights, optimizer state with its moving
    average and any partial gradient accumulation, schedule) as
    `ckpt-BATCHES.keras`, BATCHES being the batches trained on so far: at
    the end of every epoch, when `fit` stops early (the time budget), and
    every `every_steps` batches or `every_minutes` minutes; the newest
    `keep` are kept.

    A file is written under a temporary name and renamed into place
    (`os.replace` is atomic), so a crash mid-save never leaves a partial
    checkpoint under a checkpoint's name: the previous one stays intact.

    Args:
        directory: where checkpoints go.
        keep: int, how many to keep (enough for averaging).
        batches: int, the batches trained on before this `fit` (a resumed
            run's position).
        every_steps: int, batches between checkpoints (0: off).
        every_minutes: float, minutes between checkpoints (0: off).
    """

    def __init__(self, directory, keep=5, batches=0, every_steps=0, every_minutes=0.0):
        super().__init__()
        self.directory = directory
        self.keep = keep
        self.batches = self.saved = batches
        self.every_steps = every_steps
        self.every_seconds = every_minutes * 60.0
        self.last_save = time.monotonic()

    def on_train_batch_end(self, batch, logs=None):
        self.batches += 1
        if (self.every_steps and self.batches - self.saved >= self.every_steps) or (
                self.every_seconds and time.monotonic() - self.last_save >= self.every_seconds):
            self.save()

    def on_epoch_end(self, epoch, logs=None):
        if self.batches != self.saved:
            self.save()

    def save(self):
        os.makedirs(self.directory, exist_ok=True)
        path = os.path.join(self.directory, CHECKPOINT_PATTERN.format(batches=self.batches))
        temporary = path + ".tmp.keras"
        self.model.save(temporary)
        os.replace(temporary, path)
        self.saved, self.last_save = self.batches, time.monotonic()
        for _, old in list_checkpoints(self.directory)[: -self.keep]:
            os.remove(old)
        # What a save killed midway left behind.
        for stale in glob.glob(os.path.join(self.directory, "*.tmp.keras")):
            os.remove(stale)


def average_checkpoints(paths):
    """The model of the last of `paths`, with every weight replaced by the
    mean of that weight over all `paths` (the paper averages the last 5
    checkpoints of the base model, 20 of the big one).

    Returns:
        The averaged model (compiled state of the last checkpoint).
    """
    if not paths:
        raise ValueError("No checkpoints to average.")
    models = [load_model_file(p, compile=False) for p in paths]
    configs = {str(m.get_config()) for m in models}
    if len(configs) != 1:
        raise ValueError(f"Checkpoints of different models cannot be averaged: {paths}")
    averaged = models[-1]
    weights = [np.mean(stack, axis=0) for stack in zip(*(m.get_weights() for m in models))]
    averaged.set_weights(weights)
    return averaged


def newest_good_checkpoint(directory):
    """`(batches, path)` of the newest checkpoint in `directory`, or None if
    there are none. Raises a `ValueError` if the newest is damaged, naming
    it and the newest good one, so that nothing resumes from the wrong
    place silently."""
    checkpoints = list_checkpoints(directory)
    if not checkpoints:
        return None
    newest = checkpoints[-1][1]
    try:
        check_model_file(newest)
    except ValueError as error:
        # Newest first, checksumming no more files than needed.
        good = next((path for _, path in reversed(checkpoints[:-1]) if _is_good(path)), None)
        previous = (f"the previous good one is {good}: remove {newest} to "
                    "resume from it" if good else "no earlier checkpoint is good")
        raise ValueError(f"cannot resume: {error}; {previous}") from None
    return checkpoints[-1]


def _is_good(path):
    try:
        check_model_file(path)
    except ValueError:
        return False
    return True
