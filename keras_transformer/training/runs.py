"""What every training program shares: a run directory that can be
resumed, `fit` with atomic checkpoints, logs and a time budget."""

import contextlib
import dataclasses
import json
import os
import time

import keras

from keras_transformer.data.tokenizer import TOKENIZER_FILE
from keras_transformer.model_files import load_model_file
from keras_transformer.training.checkpoints import AtomicCheckpoint, newest_good_checkpoint

RUN_CONFIG_FILE = "train_config.json"  # the settings a run was started with


class TimeBudget(keras.callbacks.Callback):
    """Stops `fit` at the end of the batch where `minutes` have passed."""

    def __init__(self, minutes):
        super().__init__()
        self.seconds = minutes * 60.0
        self.start = None

    def on_train_begin(self, logs=None):
        self.start = time.monotonic()

    def on_train_batch_end(self, batch, logs=None):
        if self.seconds and time.monotonic() - self.start > self.seconds:
            self.model.stop_training = True


def resolve_jit_compile(setting):
    """A program's `jit_compile` setting as `model.compile` takes it.

    "auto" compiles the training step with XLA on JAX, which otherwise runs
    op by op. Not on TensorFlow: XLA compiles one program per batch shape,
    so it needs the static-shape pipeline (more padding) and a first epoch
    of compiling, while graph mode takes every shape at the same speed and
    scored as well in the demo (docs/RESULTS.md). Not on PyTorch
    (Keras's own "auto" there).
    """
    if setting == "auto":
        return keras.backend.backend() == "jax"
    if setting is True or setting is False:
        return setting
    raise ValueError(
        f'`jit_compile` must be "auto", True or False. Received: jit_compile={setting!r}'
    )


def check_resume(config, fields):
    """Refuses (a `ValueError`, before any work) to resume a run whose
    tokenizer is gone, since the checkpoints read its ids, or with settings
    that differ from the run's saved ones in `fields`, which a resumed run
    would otherwise ignore or apply to the wrong model."""
    tokenizer = os.path.join(config.run_dir, TOKENIZER_FILE)
    if not os.path.isfile(tokenizer):
        raise ValueError(
            f"cannot resume: {tokenizer} is missing, and the checkpoints were "
            "trained on its token ids; restore it, or start a new run"
        )
    saved_path = os.path.join(config.run_dir, RUN_CONFIG_FILE)
    if not os.path.isfile(saved_path):  # a run from before the file existed
        return
    with open(saved_path) as f:
        saved = json.load(f)
    changed = [f"--{name.replace('_', '-')} {getattr(config, name)!r} (the run's: "
               f"{saved[name]!r})" for name in fields
               if name in saved and saved[name] != getattr(config, name)]
    if changed:
        raise ValueError(
            f"cannot resume {config.run_dir} with other settings: {'; '.join(changed)}. "
            "Resume with the run's settings, or start a new run"
        )


def find_resume_point(config, fields):
    """`(epoch, path)` of the checkpoint a `--resume` run continues from
    (checked against the run's settings by `check_resume`), or None for a
    new run."""
    found = None
    if config.resume:
        found = newest_good_checkpoint(os.path.join(config.run_dir, "checkpoints"))
    if found:
        check_resume(config, fields)
    return found


def save_run_config(config, resume_from):
    """Creates the run directory and, for a new run (`resume_from` None),
    records its settings."""
    os.makedirs(config.run_dir, exist_ok=True)
    if not resume_from:
        with open(os.path.join(config.run_dir, RUN_CONFIG_FILE), "w") as f:
            json.dump(dataclasses.asdict(config), f, indent=2)


def save_results(config, model, results, jit_compile, minutes):
    """Saves `model.keras` and `results.json` in the run directory:
    `results` plus what every run records (training time, steps, backend,
    XLA, weights); returns the whole dict."""
    model.save(os.path.join(config.run_dir, "model.keras"))
    results = {
        **results, "training_minutes": minutes,
        "steps": int(keras.ops.convert_to_numpy(model.optimizer.iterations)),
        "backend": keras.backend.backend(), "jit_compile": jit_compile,
        "parameters": model.count_params(),
    }
    with open(os.path.join(config.run_dir, "results.json"), "w") as f:
        json.dump(results, f, indent=2)
    return results


def fit_with_checkpoints(config, resume_from, build, train_data, valid_data,
                         jit_compile, keep, scope=None):
    """Builds the model (`build()`), or loads the checkpoint `resume_from`,
    and fits it for `config.epochs` within `config.max_minutes`, with a
    checkpoint after every epoch (the newest `keep` kept), TensorBoard logs
    and `history.csv` in `config.run_dir`; returns the model."""
    checkpoint_dir = os.path.join(config.run_dir, "checkpoints")
    callbacks = [
        AtomicCheckpoint(checkpoint_dir, keep=keep),
        keras.callbacks.TensorBoard(os.path.join(config.run_dir, "logs")),
        keras.callbacks.CSVLogger(os.path.join(config.run_dir, "history.csv"),
                                  append=bool(resume_from)),
        TimeBudget(config.max_minutes),
    ]
    with scope or contextlib.nullcontext():
        if resume_from:
            initial_epoch, path = resume_from
            model = load_model_file(path)
            model.jit_compile = jit_compile  # this run's backend, not the saver's
            print(f"resuming from {path} (epoch {initial_epoch}, step "
                  f"{int(model.optimizer.iterations)})")
        else:
            initial_epoch = 0
            model = build()
        model.fit(train_data, validation_data=valid_data, epochs=config.epochs,
                  initial_epoch=initial_epoch, callbacks=callbacks, verbose=2,
                  shuffle=False)  # the pipelines shuffle
    return model
