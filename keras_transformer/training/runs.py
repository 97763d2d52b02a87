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
from keras_transformer.schedules import WarmupSchedule
from keras_transformer.training.budget_decay import BudgetDecay
from keras_transformer.training.checkpoints import AtomicCheckpoint, newest_good_checkpoint
from keras_transformer.training.options import OPTIMIZERS
from keras_transformer.training.step_progress import StepProgress

RUN_CONFIG_FILE = "train_config.json"  # the settings a run was started with


class TrainingBudget(keras.callbacks.Callback):
    """Stops `fit` at the end of the batch where `minutes` (0: none) have
    passed since the first `fit` it served began, or where the run has
    trained on `max_batches` (0: none), a resumed run's earlier `batches`
    included; notes when its first batch ended (`first_step_at`,
    `time.monotonic()`)."""

    def __init__(self, minutes, max_batches=0, batches=0):
        super().__init__()
        self.seconds = minutes * 60.0
        self.max_batches, self.batches = max_batches, batches
        self.start = self.first_step_at = None
        self.spent = bool(max_batches) and batches >= max_batches

    def spent_fraction(self):
        """How much of the budget is spent, from 0 to 1: the larger of the
        fractions of its minutes and of its `max_batches` (0 with
        neither). A resumed run's minutes start again; its batches count
        on."""
        fractions = [self.batches / self.max_batches] if self.max_batches else []
        if self.seconds and self.start is not None:
            fractions.append((time.monotonic() - self.start) / self.seconds)
        return min(1.0, max(fractions, default=0.0))

    def on_train_begin(self, logs=None):
        if self.start is None:
            self.start = time.monotonic()

    def on_train_batch_end(self, batch, logs=None):
        self.batches += 1
        if self.first_step_at is None:
            self.first_step_at = time.monotonic()
        if (self.seconds and time.monotonic() - self.start > self.seconds) or (
                self.max_batches and self.batches >= self.max_batches):
            self.spent = self.model.stop_training = True


def resolve_jit_compile(setting):
    """A program's `jit_compile` setting as `model.compile` takes it.

    "auto" compiles the training step with XLA on JAX, which otherwise runs
    op by op, and on TensorFlow when a GPU or TPU is present, where XLA is
    TensorFlow's usual way to fuse a Transformer's many small kernels (not
    measured here: no GPU). Not on a CPU-only TensorFlow: XLA compiles one
    program per batch shape, so it needs the static-shape pipeline (more
    padding) and a first epoch of compiling, while graph mode takes every
    shape at the same speed and scored as well or better in the demo
    (docs/RESULTS.md). Not on PyTorch (Keras's own "auto" there).
    """
    if setting == "auto":
        backend = keras.backend.backend()
        return backend == "jax" or (backend == "tensorflow" and has_accelerator())
    if setting is True or setting is False:
        return setting
    raise ValueError(
        f'`jit_compile` must be "auto", True or False. Received: jit_compile={setting!r}'
    )


def compiles_with_xla(jit_compile):
    """Whether `model.compile(jit_compile=jit_compile)` compiles the
    training step with XLA, which compiles every new batch shape: True does
    on JAX and TensorFlow, and means `torch.compile` on PyTorch."""
    return jit_compile is True and keras.backend.backend() != "torch"


def has_accelerator():
    """Whether the backend sees a GPU or TPU."""
    if keras.backend.backend() == "torch":
        import torch

        return torch.cuda.is_available()
    return any(not device.lower().startswith("cpu")
               for device in keras.distribution.list_devices())


def allow_tf32():
    """On PyTorch with a CUDA GPU, lets float32 matrix products run on the
    tensor cores as TF32, which JAX and TensorFlow do by default on the
    same GPU and PyTorch does not (twice the speed, docs/RESULTS.md).
    The command-line programs call it. Returns whether it did."""
    if keras.backend.backend() != "torch" or not has_accelerator():
        return False
    import torch

    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    return True


def decays(config):
    """Whether a run's rate falls to zero at the end of its budget: linear
    decay and a time or update budget."""
    return config.learning_rate_decay == "linear" and bool(
        config.max_minutes or config.max_updates)


def peak_rate(config, d_model):
    """`config.peak_learning_rate`, or with 0 the paper's formula's own
    peak for the width `d_model()` returns. Only then is it called, as
    finding the width may read a saved model."""
    return config.peak_learning_rate or WarmupSchedule(d_model(), config.warmup_steps).peak


def run_optimizer(config, d_model, **kwargs):
    """The run's `config.optimizer` (`transformer_adam`, the paper's, or
    `transformer_muon`) as its settings make it: their warmup and peak,
    weight decay and clipping, and `**kwargs`. A run that `decays` keeps
    its rate in a variable that `BudgetDecay` sets before every batch; any
    other follows the paper's schedule."""
    return OPTIMIZERS[config.optimizer](
        d_model, config.warmup_steps, peak=config.peak_learning_rate or None,
        weight_decay=config.weight_decay or None, global_clipnorm=config.clip_norm or None,
        learning_rate=peak_rate(config, lambda: d_model) if decays(config) else None, **kwargs)


def decay_callbacks(config, d_model, budget, steps_per_update=1):
    """`[BudgetDecay]` for a run that `decays`, else `[]`; `d_model`, a
    function that returns the model's width, as `peak_rate` takes it."""
    if not decays(config):
        return []
    return [BudgetDecay(budget, peak_rate(config, d_model), config.warmup_steps,
                        steps_per_update)]


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
    """`(batches, path)` of the checkpoint a `--resume` run continues from
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


def fit_with_checkpoints(config, resume_from, build, train_stream, batches_per_epoch,
                         valid_data, jit_compile, keep, budget, scope=None, callbacks=()):
    """Builds the model (`build()`), or loads the checkpoint `resume_from`,
    and fits it for `config.epochs` within `budget`, with checkpoints
    (`AtomicCheckpoint`: every epoch, every `config.checkpoint_every_minutes`
    and `config.checkpoint_every_steps`, the newest `keep` kept), a
    progress line and a line per epoch (`StepProgress`, none with
    `config.quiet`), TensorBoard logs and `history.csv` in
    `config.run_dir`; returns the model, ending with its weights' moving
    average if its optimizer keeps one.

    Args:
        resume_from: `(batches, path)` of the checkpoint to continue, or None.
        train_stream: a function of an epoch number returning the endless
            stream of training batches from that epoch's first batch on.
        batches_per_epoch: int, the batches of an epoch.
        budget: the run's `TrainingBudget`.
        callbacks: more callbacks, after the budget and before the
            checkpoints, which keep what they change at an epoch's end
            (e.g. `BudgetDecay`, `BudgetDropout`).
    """
    batches = resume_from[0] if resume_from else 0
    epoch, batch = divmod(batches, batches_per_epoch)
    checkpoints = AtomicCheckpoint(
        os.path.join(config.run_dir, "checkpoints"), keep, batches,
        config.checkpoint_every_steps, config.checkpoint_every_minutes)
    log = keras.callbacks.CSVLogger(os.path.join(config.run_dir, "history.csv"),
                                    append=bool(resume_from))
    planned = config.epochs * batches_per_epoch
    progress = StepProgress(min(planned, budget.max_batches or planned) - batches,
                            config.max_minutes * 60.0, quiet=config.quiet,
                            epochs=config.epochs)
    callbacks = [budget, *callbacks, checkpoints, keras.callbacks.TensorBoard(
        os.path.join(config.run_dir, "logs")), log, progress]
    with scope or contextlib.nullcontext():
        if resume_from:
            model = load_model_file(resume_from[1])
            model.jit_compile = jit_compile  # this run's backend, not the saver's
            print(f"resuming from {resume_from[1]} (epoch {epoch + 1}, batch {batch}, "
                  f"{int(model.optimizer.iterations)} optimizer steps)")
        else:
            model = build()
        # `fit` ends by copying the weights' moving average into them; the
        # run does that once, after its last `fit`, and trains on the raw
        # weights until then.
        finalize = model.optimizer.finalize_variable_values
        model.optimizer.finalize_variable_values = lambda variables: None
        try:
            # A run resumed mid-epoch first finishes that epoch's batches.
            for steps in ([batches_per_epoch - batch] if batch else []) + [batches_per_epoch]:
                if epoch >= config.epochs or budget.spent:
                    break
                stream = train_stream(epoch).skip(batches_per_epoch - steps)
                model.fit(stream, validation_data=valid_data, initial_epoch=epoch,
                          epochs=epoch + 1 if steps < batches_per_epoch else config.epochs,
                          steps_per_epoch=steps, callbacks=callbacks,
                          verbose=0,  # `progress` reports each epoch
                          shuffle=False)  # the pipelines shuffle
                epoch, log.append = epoch + 1, True
        finally:
            del model.optimizer.finalize_variable_values  # the method again
            progress.close()
        finalize(model.trainable_weights)
    return model
