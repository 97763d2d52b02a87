"""Checkpoints written atomically, and checkpoint averaging (section 6.1)."""

import glob
import os
import re

import keras
import numpy as np

from keras_transformer.model_files import check_model_file, load_model_file

CHECKPOINT_PATTERN = "ckpt-{epoch:04d}.keras"


def list_checkpoints(directory):
    """The checkpoints in `directory`, oldest first, as `(epoch, path)`."""
    found = []
    for path in glob.glob(os.path.join(directory, "ckpt-*.keras")):
        match = re.fullmatch(r"ckpt-(\d+)\.keras", os.path.basename(path))
        if match:
            found.append((int(match.group(1)), path))
    return sorted(found)


class AtomicCheckpoint(keras.callbacks.Callback):
    """Saves the whole model (weights, optimizer state, schedule) after
    every epoch as `ckpt-EPOCH.keras`, keeping the newest `keep`.

    The file is written under a temporary name and renamed into place
    (`os.replace` is atomic), so a crash mid-save never leaves a corrupt
    checkpoint: the previous one stays intact.

    Args:
        directory: where checkpoints go.
        keep: int, how many to keep (enough for averaging).
    """

    def __init__(self, directory, keep=5):
        super().__init__()
        self.directory = directory
        self.keep = keep

    def on_epoch_end(self, epoch, logs=None):
        os.makedirs(self.directory, exist_ok=True)
        path = os.path.join(self.directory, CHECKPOINT_PATTERN.format(epoch=epoch + 1))
        temporary = path + ".tmp.keras"
        self.model.save(temporary)
        os.replace(temporary, path)
        for _, old in list_checkpoints(self.directory)[: -self.keep]:
            os.remove(old)


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
    """`(epoch, path)` of the newest checkpoint in `directory`, or None if
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
