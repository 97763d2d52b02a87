"""Residual dropout that follows the epochs a budget holds."""

import keras

from keras_transformer.checks import check_positive_int
from keras_transformer.training.runs import compiles_with_xla

# `(epochs, rate)`: the rate for a run that will see at least `epochs`
# epochs, below the first none. Measured with `mini` at d_model 96 on the
# shipped corpus in the same minutes, and held at 128 and 192
# (docs/RESULTS.md): 0.05 from epoch 3 scored 0.3-0.6 BLEU more than none
# at 16 epochs and 1.2 less at 11, where its steps cost more than it
# gained; at 35 epochs 0.1 scored 5.7 more than none.
RATES = ((15, 0.05), (30, 0.1))


def rate_for_epochs(epochs):
    """The residual dropout rate for a run of `epochs` epochs (`RATES`)."""
    return max((rate for least, rate in RATES if epochs >= least), default=0.0)


class BudgetDropout(keras.callbacks.Callback):
    """Trains the first `after` epochs without residual dropout, then sets
    the model's rate (`ModelBase.set_dropout_rate`) for the epochs the run
    will get (`rate_for_epochs`): `epochs`, or fewer where the budget ends
    first at the pace of the epoch just ended. Dropout's masks slow the
    step, so the second epoch with dropout on (the first traces the step
    again) decides once more, at its own pace, and may lower the rate (to
    0 where the run will now fall short of the first row of `RATES`); the
    rate is final from then on.

    A model that overfits only late in a run needs dropout only then, so
    the first epochs lose nothing to it, and a slow machine, whose budget
    holds few epochs, never pays for it. In graph mode the new rate is
    traced into the training step once. Under XLA that would compile
    every batch shape again (a minute of the JAX demo's 10), so there the
    dropouts read their rate from a variable from the first step
    (`Dropout.variable_rate`): the first compiles take longer, and the
    step at rate 0 is as fast (docs/RESULTS.md). A resumed run past epoch
    `after` keeps its checkpoint's rate.

    Args:
        budget: the run's `TrainingBudget`.
        batches_per_epoch: int.
        epochs: int, the epochs the run stops at if its budget lasts.
        after: int, the epochs trained before the rate is set.
    """

    def __init__(self, budget, batches_per_epoch, epochs, after=2):
        super().__init__()
        for name, value in [("batches_per_epoch", batches_per_epoch), ("epochs", epochs),
                            ("after", after)]:
            check_positive_int(name, value)
        self.budget, self.batches_per_epoch = budget, batches_per_epoch
        self.epochs, self.after = epochs, after
        self.last = None  # (batches, spent fraction) when last measured
        self.rate = self.projected_epochs = None  # set at the end of epoch `after`
        self.variable_rate = False  # set where the step is compiled with XLA

    def on_train_begin(self, logs=None):
        if self.last is None:
            self.last = self._now()
        if compiles_with_xla(self.model.jit_compile) and not self.variable_rate:
            self.model.set_dropout_rate(self.model.dropout_rate, variable_rate=True)
            self.model.make_train_function(force=True)
            self.variable_rate = True

    def on_epoch_end(self, epoch, logs=None):
        now = self._now()
        if epoch + 1 == self.after:
            projected = self.project(self.last, now)
            self._set(rate_for_epochs(projected), projected, epoch, "the budget holds")
        elif epoch == self.after + 1 and self.rate:  # set by this run, on for two epochs
            projected = self.project(self.last, now)
            self._set(min(rate_for_epochs(projected), self.model.dropout_rate), projected,
                      epoch, "with it the budget holds")
        self.last = now

    def _set(self, rate, projected_epochs, epoch, reason):
        """Trains at `rate` from the epoch after `epoch` (0-based) on."""
        self.rate, self.projected_epochs = rate, projected_epochs
        if rate != self.model.dropout_rate:  # else the step needs no new trace
            self.model.set_dropout_rate(rate)
            if not self.variable_rate:
                self.model.make_train_function(force=True)
        print(f"residual dropout {rate} from epoch {epoch + 2}: {reason} "
              f"about {projected_epochs:.0f} epochs")

    def project(self, last, now):
        """The epochs the run will end at, from `(batches, spent fraction)`
        at the start and at the end of the interval just measured."""
        (batches_before, spent_before), (batches, spent) = last, now
        epochs = self.epochs
        if spent > spent_before and batches > batches_before:
            batches_left = (1.0 - spent) * (batches - batches_before) / (spent - spent_before)
            epochs = min(epochs, (batches + batches_left) / self.batches_per_epoch)
        return epochs

    def _now(self):
        return self.budget.batches, self.budget.spent_fraction()
