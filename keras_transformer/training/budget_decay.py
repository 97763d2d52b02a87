"""A learning rate that knows when the run ends."""

import math

import keras

from keras_transformer.checks import check_positive_int


class BudgetDecay(keras.callbacks.Callback):
    """Sets the optimizer's learning rate before every batch: a linear rise
    to `peak` over `warmup_steps` updates, then a linear fall to zero as
    the run's budget is spent (`TrainingBudget.spent_fraction`: its
    minutes or its batches, whichever ends first).

    The paper's inverse square root never reaches zero, so a run cut off by
    a deadline ends at a high rate; annealing to zero at the deadline is
    what a budgeted run needs (docs/RESULTS.md has the demo's figures).

    The rate is a plain variable of the optimizer (`transformer_adam(...,
    learning_rate=peak)`), so every backend's compiled step reads the
    value set here. JAX's `fit` keeps the training state outside the
    variables and writes it back whenever a callback reads `self.model`; the rate
    moves in steps of 1/1000 of the budget, so that happens at most about
    `1000 + warmup_steps` times a run.

    Args:
        budget: the run's `TrainingBudget`.
        peak: float, the rate at the end of warmup.
        warmup_steps: int, updates of linear warmup.
        steps_per_update: int, batches an update (gradient accumulation).
    """

    RESOLUTION = 1000  # the rate's steps a budget

    def __init__(self, budget, peak, warmup_steps, steps_per_update=1):
        super().__init__()
        if not peak > 0:
            raise ValueError(f"`peak` must be positive. Received: peak={peak!r}")
        check_positive_int("warmup_steps", warmup_steps)
        check_positive_int("steps_per_update", steps_per_update)
        self.budget, self.peak = budget, peak
        self.warmup_steps, self.steps_per_update = warmup_steps, steps_per_update
        self.rate = None  # the rate last set

    def rate_at(self, batches, spent):
        """The rate for the batch after `batches` batches, with the
        fraction `spent` (0 to 1) of the budget gone."""
        update = batches // self.steps_per_update + 1
        remaining = 1.0 - math.floor(spent * self.RESOLUTION) / self.RESOLUTION
        return self.peak * min(1.0, update / self.warmup_steps) * remaining

    def on_train_batch_begin(self, batch, logs=None):
        rate = self.rate_at(self.budget.batches, self.budget.spent_fraction())
        if rate == self.rate:
            return
        self.model.optimizer.learning_rate = rate  # `model` syncs JAX's state first
        self.rate = rate
