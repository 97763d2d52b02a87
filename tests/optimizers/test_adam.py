"""Our `Adam` (a fused update on PyTorch) against Keras's own Adam, which
nobody here wrote: the same weights and moments after the same updates."""

import keras
import numpy as np
import pytest

import keras_transformer as kt
from tests.helpers import assert_optimizer_round_trips, numpy_moving_averages, to_numpy

PAPER = dict(beta_1=0.9, beta_2=0.98, epsilon=1e-9)
SHAPES = [(3, 4), (4,), (2, 3, 2)]


def _variables(dtypes=("float32",) * 3):
    rng = np.random.default_rng(0)
    return [keras.Variable(rng.normal(size=shape), dtype=dtype)
            for shape, dtype in zip(SHAPES, dtypes)]


def _gradients(steps, dtypes=("float32",) * 3):
    rng = np.random.default_rng(1)
    # Gradients from 1 down to 1e-10: below about 1e-8 epsilon sets the
    # update's size, so an epsilon added in the wrong place shows.
    return [[keras.ops.convert_to_tensor(
        rng.normal(size=shape) * 10.0 ** -rng.integers(0, 11), dtype)
        for shape, dtype in zip(SHAPES, dtypes)] for _ in range(steps)]


def _train(optimizer, steps=6, dtypes=("float32",) * 3):
    variables = _variables(dtypes)
    for grads in _gradients(steps, dtypes):
        optimizer.apply(grads, variables)
    return variables


def _assert_same_state(ours, theirs, ours_variables, their_variables):
    for a, b in zip(ours_variables, their_variables):
        np.testing.assert_allclose(to_numpy(a), to_numpy(b), rtol=1e-6, atol=1e-6)
    assert len(ours.variables) == len(theirs.variables)
    for a, b in zip(ours.variables, theirs.variables):
        np.testing.assert_allclose(to_numpy(a), to_numpy(b), rtol=1e-5, atol=1e-12)


@pytest.mark.parametrize("kwargs", [
    dict(learning_rate=1e-2),
    dict(learning_rate=kt.WarmupSchedule(16, 3)),  # a schedule, rising then falling
    dict(learning_rate=1e-2, amsgrad=True),
    dict(learning_rate=1e-2, weight_decay=0.1, clipnorm=0.5),
    dict(learning_rate=1e-2, gradient_accumulation_steps=2),
    dict(learning_rate=1e-2, use_ema=True, ema_momentum=0.9),
], ids=["constant", "schedule", "amsgrad", "decay_clip", "accumulation", "ema"])
def test_the_same_updates_as_keras_adam(kwargs):
    ours, theirs = kt.optimizers.Adam(**PAPER, **kwargs), keras.optimizers.Adam(**PAPER, **kwargs)
    ours_variables, their_variables = _train(ours), _train(theirs)
    _assert_same_state(ours, theirs, ours_variables, their_variables)
    # The updates moved the weights (so the comparison compared something).
    assert not np.allclose(to_numpy(ours_variables[0]), to_numpy(_variables()[0]), atol=1e-4)
    if kwargs.get("use_ema"):
        ours.finalize_variable_values(ours_variables)
        theirs.finalize_variable_values(their_variables)
        _assert_same_state(ours, theirs, ours_variables, their_variables)


def test_weights_of_two_dtypes_update_as_keras_adam():
    # PyTorch's kernel takes one dtype per call: ours groups the weights.
    dtypes = ("float32", "float64", "float32")
    ours, theirs = kt.optimizers.Adam(1e-2, **PAPER), keras.optimizers.Adam(1e-2, **PAPER)
    _assert_same_state(ours, theirs, _train(ours, dtypes=dtypes),
                       _train(theirs, dtypes=dtypes))


def _transformer():
    return kt.Transformer(vocabulary_size=40, num_layers=1, d_model=16, num_heads=2,
                          d_ff=32, dropout_rate=0.0, max_length=16)


def _fit(optimizer):
    keras.utils.set_random_seed(0)
    model = _transformer()
    model.compile(optimizer=optimizer, loss=kt.LabelSmoothedCrossEntropy(0.1))
    rng = np.random.default_rng(2)
    ids = rng.integers(1, 40, (3, 8, 6)).astype("int32")
    model.fit({"encoder_token_ids": ids[0], "decoder_token_ids": ids[1]}, ids[2],
              batch_size=4, epochs=2, shuffle=False, verbose=0)
    return model


@pytest.mark.parametrize("loss_scale", [False, True])
def test_fit_trains_a_transformer_as_keras_adam(loss_scale):
    # With the moving average, which `fit` writes into the weights at the
    # end; and under a loss scale (as mixed_float16 trains), whose scaled
    # gradients are unscaled before the update.
    def wrap(optimizer):
        return keras.optimizers.LossScaleOptimizer(optimizer, 2.0**10) if loss_scale else optimizer

    ours = _fit(wrap(kt.transformer_adam(16, warmup_steps=2, use_ema=True)))
    theirs = _fit(wrap(keras.optimizers.Adam(kt.WarmupSchedule(16, 2), **PAPER, use_ema=True)))
    assert int(ours.optimizer.iterations) == 4
    compared = 0
    for a, b in zip(ours.weights, theirs.weights):
        # A key's bias shifts every score of a query equally, which softmax
        # ignores: its gradient is rounding noise, and Adam's normalised
        # step on noise differs between any two orders of summation.
        if not a.path.endswith("key/bias"):
            np.testing.assert_allclose(to_numpy(a), to_numpy(b), rtol=1e-5, atol=1e-6)
            compared += 1
    assert compared == len(ours.weights) - 3


def test_saves_and_loads_with_its_state(tmp_path):
    model = _fit(kt.transformer_adam(16, warmup_steps=2))
    assert_optimizer_round_trips(model, tmp_path / "model.keras", kt.optimizers.Adam)


def test_a_second_fit_continues_the_moving_average():
    # Keras's own Adam fails in the second `fit` on JAX: the first has made
    # each weight and its average one buffer, which the step donates twice.
    momentum = 0.5
    model = _transformer()
    model.compile(optimizer=kt.optimizers.Adam(1e-2, **PAPER, use_ema=True,
                                               ema_momentum=momentum),
                  loss=kt.LabelSmoothedCrossEntropy(0.1))
    rng = np.random.default_rng(3)
    ids = rng.integers(1, 40, (3, 4, 6)).astype("int32")
    inputs = {"encoder_token_ids": ids[0], "decoder_token_ids": ids[1]}
    # One step an epoch: the raw weights after every step (on JAX they are
    # only synced back to the variables between epochs).
    steps = []
    record = keras.callbacks.LambdaCallback(
        on_epoch_end=lambda epoch, logs: steps.append(model.get_weights()))
    model.fit(inputs, ids[2], batch_size=4, epochs=3, callbacks=[record], verbose=0)
    after_first = model.get_weights()
    model.fit(inputs, ids[2], batch_size=4, epochs=3, callbacks=[record], verbose=0)
    assert int(model.optimizer.iterations) == len(steps) == 6
    # Keras's rule runs across both fits; each `fit` ends with the weights
    # set to the average, and the second starts from there.
    averages = numpy_moving_averages(steps, momentum)
    for got, expected in ((after_first, averages[2]), (model.get_weights(), averages[5])):
        for a, b in zip(got, expected):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert not np.allclose(steps[5][0], averages[5][0])  # the average is not the last step
