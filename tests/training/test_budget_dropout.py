import csv

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_transformer as kt
from keras_transformer.layers import Dropout
from keras_transformer.model_files import load_model_file
from keras_transformer.training import TrainConfig
from keras_transformer.training.budget_dropout import BudgetDropout, rate_for_epochs
from keras_transformer.training.runs import (
    TrainingBudget, fit_with_checkpoints, resolve_jit_compile)
from tests.helpers import to_numpy


def test_the_rate_steps_up_with_the_epochs():
    assert [rate_for_epochs(epochs) for epochs in (0, 11, 14.9, 15, 29.9, 30, 1000)] == [
        0.0, 0.0, 0.0, 0.05, 0.05, 0.1, 0.1]


def test_the_epochs_are_projected_from_the_pace_of_the_last_interval():
    dropout = BudgetDropout(TrainingBudget(0), batches_per_epoch=100, epochs=40)
    # 10% of the budget went on the last 100 batches: 800 more after 200
    assert dropout.project((100, 0.1), (200, 0.2)) == pytest.approx(10.0)
    assert dropout.project((100, 0.01), (200, 0.02)) == 40  # the epochs end first
    assert dropout.project((0, 0.0), (200, 0.0)) == 40  # no budget


class _Budget:
    """`TrainingBudget`'s two readings, set by the test."""
    batches, spent = 0, 0.0

    def spent_fraction(self):
        return self.spent


class _Model:
    """What `BudgetDropout` reads and calls on a model, recorded."""
    jit_compile, dropout_rate, traces = False, 0.0, 0

    def set_dropout_rate(self, rate):
        self.dropout_rate = rate

    def make_train_function(self, force=False):
        self.traces += 1


# Spent fractions at the end of epochs 1-4 (100 batches each) of a 40-epoch run.
@pytest.mark.parametrize("spent, rates, traces", [
    # Epoch 2's pace holds 20 epochs (0.05); epoch 4's, with dropout, 12.2: 0.
    ((0.05, 0.10, 0.17, 0.26), [0.0, 0.05, 0.05, 0.0], 2),
    # Dropout slows the step less: 17 epochs at epoch 4's pace, 0.05 stays.
    ((0.05, 0.10, 0.16, 0.22), [0.0, 0.05, 0.05, 0.05], 1),
    # Epoch 2's pace holds 12.5 epochs: no dropout, and nothing decided again.
    ((0.08, 0.16, 0.24, 0.32), [0.0, 0.0, 0.0, 0.0], 0),
])
def test_the_second_epoch_with_dropout_may_lower_the_rate(spent, rates, traces, capsys):
    budget, model = _Budget(), _Model()
    dropout = BudgetDropout(budget, batches_per_epoch=100, epochs=40)
    dropout.set_model(model)
    dropout.on_train_begin()
    seen = []
    for epoch, fraction in enumerate(spent):
        budget.batches, budget.spent = 100 * (epoch + 1), fraction
        dropout.on_epoch_end(epoch)
        seen.append(model.dropout_rate)
    assert seen == rates and model.traces == traces and dropout.rate == rates[-1]
    if traces == 2:
        assert capsys.readouterr().out.splitlines()[-1] == (
            "residual dropout 0.0 from epoch 5: with it the budget holds about 12 epochs")


def test_a_resumed_run_keeps_its_checkpoints_rate():
    budget, model = _Budget(), _Model()
    model.dropout_rate = 0.05  # set before the run stopped
    dropout = BudgetDropout(budget, batches_per_epoch=100, epochs=40)
    dropout.set_model(model)
    budget.batches, budget.spent = 200, 0.0  # resumed at the start of epoch 3
    dropout.on_train_begin()
    for epoch, fraction in [(2, 0.5), (3, 0.99)]:  # a pace that holds 4 epochs
        budget.batches, budget.spent = 100 * (epoch + 1), fraction
        dropout.on_epoch_end(epoch)
    assert (model.dropout_rate, model.traces, dropout.rate) == (0.05, 0, None)


@pytest.mark.parametrize("name, value", [
    ("batches_per_epoch", 0), ("epochs", 2.5), ("after", -1)])
def test_bad_settings_are_refused(name, value):
    settings = dict(batches_per_epoch=10, epochs=40, after=2) | {name: value}
    with pytest.raises(ValueError, match=f"{name}={value!r}"):
        BudgetDropout(TrainingBudget(0), **settings)


# `train`'s path on every backend, and TensorFlow's XLA (`--jit-compile true`).
@pytest.mark.parametrize("jit_compile", ["auto"] + (
    [True] if keras.backend.backend() == "tensorflow" else []))
def test_the_rate_reaches_the_step_and_is_saved_with_the_epoch(jit_compile, tmp_path):
    """With the weights held still (a learning rate of 0), epoch 1's
    training loss is the loss without dropout, and epochs 2 and 3 give the
    losses of the model called at rate 0.1 with the random state of epoch
    1's end, traced as the step was (TensorFlow's graph mode draws its
    masks from `keras.random`): the compiled step uses the new rate's
    masks. Under XLA the step is traced once, its dropouts reading the
    rate from a variable; in TensorFlow's graph mode it is traced again,
    and PyTorch runs eagerly."""
    keras.utils.set_random_seed(0)
    model = kt.Transformer.from_preset("tiny", vocabulary_size=50, dropout_rate=0.0)
    loss = kt.LabelSmoothedCrossEntropy(epsilon=0.0)
    xla = resolve_jit_compile(jit_compile)
    model.compile(optimizer=keras.optimizers.SGD(0.0), loss=loss, jit_compile=xla)
    rng = np.random.default_rng(0)
    inputs = {"encoder_token_ids": rng.integers(3, 50, (4, 9)).astype("int32"),
              "decoder_token_ids": rng.integers(3, 50, (4, 8)).astype("int32")}
    labels = rng.integers(3, 50, (4, 8)).astype("int32")
    dropouts = [layer for layer in model._flatten_layers() if isinstance(layer, Dropout)]
    calls, call = [], dropouts[0].call  # a compiled step calls it only when traced
    dropouts[0].call = lambda x, training=False: calls.append(bool(training)) or call(x, training)
    states = []
    record = keras.callbacks.LambdaCallback(on_epoch_end=lambda epoch, logs: epoch or states.extend(
        to_numpy(layer.seed_generator.state) for layer in dropouts))
    config = TrainConfig(run_dir=str(tmp_path), epochs=3, max_minutes=0, quiet=True)
    budget = TrainingBudget(0)  # none: the rate is the one for `epochs` = 30
    dropout = BudgetDropout(budget, batches_per_epoch=1, epochs=30, after=1)
    fit_with_checkpoints(
        config, None, lambda: model,
        lambda epoch: tf.data.Dataset.from_tensors((inputs, labels)).repeat(), 1, None,
        jit_compile=False, keep=3, budget=budget, callbacks=[dropout, record])

    assert (dropout.projected_epochs, dropout.rate, model.dropout_rate) == (30, 0.1, 0.1)
    assert dropout.variable_rate == (xla and keras.backend.backend() != "torch")
    passes = sum(calls)  # the layer's training calls in fit's traces or steps
    with open(tmp_path / "history.csv") as f:
        losses = [float(row["loss"]) for row in csv.DictReader(f)]
    expected = [float(to_numpy(loss(labels, model(inputs))))]
    for layer, state in zip(dropouts, states, strict=True):
        layer.seed_generator.state.assign(state)

    def forward():  # traced as the step was: TensorFlow's graph mode draws its own masks
        if keras.backend.backend() == "tensorflow" and not xla:
            return tf.function(model, jit_compile=False)(inputs, training=True)  # a new trace
        return model(inputs, training=True)

    expected += [float(to_numpy(loss(labels, forward()))) for _ in range(2)]
    np.testing.assert_allclose(losses, expected, rtol=1e-5)
    assert min(abs(expected[0] - e) for e in expected[1:]) > 1e-3  # dropout shows
    per_pass = (sum(calls) - passes) / 2  # in the two passes just made
    assert per_pass == 2  # the embeddings' dropout serves both sides
    assert (passes == per_pass) == dropout.variable_rate  # traced once under XLA only
    # The checkpoint of epoch 1's end, which a resumed run starts from, has the rate.
    saved = load_model_file(tmp_path / "checkpoints" / "ckpt-000000001.keras")
    assert saved.dropout_rate == 0.1
    assert {layer.rate for layer in saved._flatten_layers() if isinstance(layer, Dropout)} == {
        0.1, 0.0}  # the attention weights' dropout stays 0
