import dataclasses

import keras
import numpy as np
import pytest

from keras_transformer.training.budget_decay import BudgetDecay
from keras_transformer.training.runs import TrainingBudget, decay_callbacks
from keras_transformer.training.train import TrainConfig


def test_the_rate_rises_over_warmup_then_falls_to_zero_with_the_budget():
    decay = BudgetDecay(TrainingBudget(0), peak=1e-3, warmup_steps=4, steps_per_update=2)
    # batches 0-1 make update 1 of 4, batches 6-7 update 4: the peak
    rates = [decay.rate_at(batches, 0.0) for batches in range(10)]
    np.testing.assert_allclose(rates, np.array([1, 1, 2, 2, 3, 3, 4, 4, 4, 4]) * 0.25e-3)
    np.testing.assert_allclose(
        [decay.rate_at(100, spent) for spent in (0.0, 0.25, 0.9999, 1.0)],
        [1e-3, 0.75e-3, 0.001e-3, 0.0])


def test_the_spent_fraction_is_the_larger_of_the_times_and_the_batches(monkeypatch):
    assert TrainingBudget(0, max_batches=40, batches=10).spent_fraction() == 0.25
    assert TrainingBudget(0).spent_fraction() == 0.0  # no budget: no decay
    budget = TrainingBudget(minutes=1.0, max_batches=1000, batches=500)
    budget.start = 1000.0
    monkeypatch.setattr("time.monotonic", lambda: 1045.0)
    assert budget.spent_fraction() == 0.75  # the minutes end first
    budget.batches = 900
    assert budget.spent_fraction() == 0.9
    monkeypatch.setattr("time.monotonic", lambda: 1100.0)
    assert budget.spent_fraction() == 1.0


def test_fit_applies_the_rate_set_before_each_batch():
    """SGD on a weight whose gradient is 1 moves it by the rate of each
    step, so the weight records the rates the compiled step really used
    (on JAX too, whose `fit` keeps its state outside the variables)."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((1,))
    layer = keras.layers.Dense(1, use_bias=False, kernel_initializer="zeros")
    model = keras.Model(inputs, layer(inputs))
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.0),
                  loss=lambda y_true, y_pred: keras.ops.mean(y_pred))
    budget = TrainingBudget(0, max_batches=8)
    x = np.ones((8, 1), "float32")
    model.fit(x, x, batch_size=1, epochs=2, steps_per_epoch=4, verbose=0, shuffle=False,
              callbacks=[budget, BudgetDecay(budget, peak=0.1, warmup_steps=2)])
    # warmup over 2 updates, then 1 - batches/8: 0.5, 7/8, 6/8, ..., 1/8
    rates = 0.1 * np.array([0.5, 7, 6, 5, 4, 3, 2, 1]) / np.array([1, 8, 8, 8, 8, 8, 8, 8])
    np.testing.assert_allclose(keras.ops.convert_to_numpy(layer.kernel), [[-rates.sum()]],
                               rtol=1e-6)
    np.testing.assert_allclose(float(model.optimizer.learning_rate), 0.1 / 8, rtol=1e-6)


@pytest.mark.parametrize("kwargs, message", [
    (dict(peak=0.0, warmup_steps=1), "`peak` must be positive. Received: peak=0.0"),
    (dict(peak=1e-3, warmup_steps=0), "warmup_steps"),
])
def test_bad_settings_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        BudgetDecay(TrainingBudget(0), **kwargs)


def test_decay_callbacks_find_the_width_only_for_the_formulas_peak():
    # `finetune --pretrained` finds its width in a saved model's file: only
    # a decaying run at --peak-learning-rate 0 may open it.
    calls = []

    def d_model():
        calls.append("d_model")
        return 512

    budget = TrainingBudget(0, 100)
    config = TrainConfig(max_updates=100, warmup_steps=4000, peak_learning_rate=4e-3)
    [decay] = decay_callbacks(config, d_model, budget)
    assert decay.peak == 4e-3 and calls == []
    [decay] = decay_callbacks(dataclasses.replace(config, peak_learning_rate=0.0), d_model,
                              budget)
    # the paper's peak, d_model^-0.5 x warmup_steps^-0.5 for the base model
    np.testing.assert_allclose(decay.peak, 6.98771e-4, rtol=1e-5)
    assert calls == ["d_model"]
    assert decay_callbacks(dataclasses.replace(config, learning_rate_decay="paper",
                                               peak_learning_rate=0.0), d_model, budget) == []
    assert calls == ["d_model"]
