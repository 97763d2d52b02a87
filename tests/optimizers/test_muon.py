"""`transformer_muon` against Muon written here in NumPy from its
definition, and against PyTorch's `torch.optim.Muon`, which nobody here
wrote."""

import keras
import numpy as np
import pytest

import keras_transformer as kt
from keras_transformer.optimizers.muon import OUTPUT_LAYERS
from tests.helpers import assert_optimizer_round_trips, to_numpy

LR, DECAY, STEPS = 1e-2, 0.1, 3


def _layers(extra_hidden=False):
    """A hidden matrix, a taller one (Muon works on its transpose), an
    embedding table, an output layer and a bias (and, with `extra_hidden`,
    a second hidden matrix of the first's shape): `{path: variable}`."""
    keras.utils.set_random_seed(0)
    layers = [keras.layers.Dense(6, name="hidden"), keras.layers.Dense(3, name="tall"),
              keras.layers.Embedding(7, 4, name="token_embedding"),
              keras.layers.Dense(5, name="logits")]
    shapes = [(None, 4), (None, 9), None, (None, 4)]
    if extra_hidden:
        layers, shapes = layers + [keras.layers.Dense(6, name="hidden_2")], shapes + [(None, 4)]
    for layer, shape in zip(layers, shapes):
        layer.build(shape)
    return {v.path: v for layer in layers for v in layer.trainable_variables}


def _gradients(variables, steps=STEPS):
    rng = np.random.default_rng(1)
    return [{path: (rng.normal(size=v.shape) * 10.0 ** -rng.integers(0, 3)).astype("float32")
             for path, v in variables.items()} for _ in range(steps)]


def _train_ours(variables, gradients, **kwargs):
    optimizer = kt.transformer_muon(4, learning_rate=LR, weight_decay=DECAY, **kwargs)
    for grads in gradients:
        optimizer.apply([keras.ops.convert_to_tensor(grads[p]) for p in variables],
                        list(variables.values()))
    return optimizer, {p: to_numpy(v) for p, v in variables.items()}


def _orthogonalised(x, steps=5, a=3.4445, b=-4.7750, c=2.0315):
    """Muon's quintic Newton-Schulz iteration on the wide orientation."""
    tall = x.shape[0] > x.shape[1]
    x = x.T if tall else x
    x = x / (np.linalg.norm(x) + 1e-7)
    for _ in range(steps):
        gram = x @ x.T
        x = a * x + (b * gram + c * gram @ gram) @ x
    return x.T if tall else x


def test_hidden_matrices_take_muons_step_and_the_rest_the_papers_adamw():
    variables = _layers()
    start = {p: to_numpy(v).astype("float64") for p, v in variables.items()}
    gradients = _gradients(variables)
    _, ours = _train_ours(variables, gradients)

    expected, momentum, velocity = dict(start), {}, {}
    for t, grads in enumerate(gradients, 1):
        for path, g in grads.items():
            g = g.astype("float64")
            w = expected[path] * (1 - LR * DECAY)  # decoupled decay, before the step
            m, v = momentum.get(path, 0.0), velocity.get(path, 0.0)
            if path in ("hidden/kernel", "tall/kernel"):
                m = 0.95 * m + g
                update = _orthogonalised(g + 0.95 * m)  # Nesterov
                w = w - LR * 0.2 * np.sqrt(max(w.shape)) * update
            else:
                m = m + (g - m) * 0.1
                v = v + (g * g - v) * 0.02
                w = w - LR * np.sqrt(1 - 0.98**t) / (1 - 0.9**t) * m / (np.sqrt(v) + 1e-9)
            expected[path], momentum[path], velocity[path] = w, m, v
    assert sorted(ours) == sorted(expected)
    for path in ours:
        np.testing.assert_allclose(ours[path], expected[path], rtol=1e-4, atol=1e-6,
                                   err_msg=path)
    # Muon's orthogonalised step moves every direction of the matrix alike:
    # the first step's singular values sit near 1 (0.7-1.2 by design).
    first = _orthogonalised(1.95 * gradients[0]["hidden/kernel"].astype("float64"))
    singular = np.linalg.svd(first, compute_uv=False)
    assert singular.min() > 0.6 and singular.max() < 1.25


def test_hidden_matrices_match_pytorchs_muon():
    import torch

    variables = {p: v for p, v in _layers().items() if p in ("hidden/kernel", "tall/kernel")}
    start = {p: to_numpy(v) for p, v in variables.items()}
    gradients = _gradients(variables)
    _, ours = _train_ours(variables, gradients)

    # PyTorch keeps its momentum as an average, `(1 - 0.95)` times Keras's
    # sum; Newton-Schulz normalises the scale away. It iterates in
    # bfloat16, hence the tolerance.
    params = {p: torch.nn.Parameter(torch.tensor(w)) for p, w in start.items()}
    reference = torch.optim.Muon(list(params.values()), lr=LR, weight_decay=DECAY,
                                 momentum=0.95, nesterov=True,
                                 adjust_lr_fn="match_rms_adamw")
    for grads in gradients:
        for path, param in params.items():
            param.grad = torch.tensor(grads[path])
        reference.step()
    for path, param in params.items():
        theirs = param.detach().numpy()
        step = np.abs(theirs - start[path]).max()
        np.testing.assert_allclose(ours[path] - start[path], theirs - start[path],
                                   atol=0.03 * step, err_msg=path)


@pytest.mark.parametrize("kwargs", [
    dict(),
    dict(weight_decay=0.1, adam_weight_decay=0.03, clipnorm=0.5),
    dict(gradient_accumulation_steps=2),
    dict(use_ema=True, ema_momentum=0.9),
    dict(nesterov=False, rms_rate=None),
], ids=["default", "decay_clip", "accumulation", "ema", "plain"])
def test_the_same_updates_as_keras_muon(kwargs):
    # On PyTorch ours stacks each shape's matrices into one batch (two
    # hidden ones share a shape here); elsewhere it is Keras's update.
    def train(optimizer):
        variables = _layers(extra_hidden=True)
        for grads in _gradients(variables, steps=4):
            optimizer.apply([keras.ops.convert_to_tensor(grads[p]) for p in variables],
                            list(variables.values()))
        optimizer.finalize_variable_values(list(variables.values()))
        return [to_numpy(v) for v in variables.values()], [to_numpy(v) for v in optimizer.variables]

    ours = train(kt.optimizers.Muon(LR, **kwargs))
    theirs = train(keras.optimizers.Muon(LR, exclude_layers=list(OUTPUT_LAYERS), **kwargs))
    assert len(ours[1]) == len(theirs[1])  # weights, then the optimizer's state
    for a, b in zip(ours[0] + ours[1], theirs[0] + theirs[1]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
    assert not np.allclose(ours[0][0], to_numpy(_layers()["hidden/kernel"]), atol=1e-3)


def test_output_layers_and_embeddings_take_adamw():
    optimizer = kt.transformer_muon(16)
    model = kt.Transformer(vocabulary_size=30, d_model=16, num_heads=2, d_ff=32,
                           num_layers=1, max_length=8, tie_embeddings=False)
    uses_adamw = {v.path for v in model.trainable_variables if optimizer._should_use_adamw(v)}
    kernels = {v.path for v in model.trainable_variables if len(v.shape) == 2}
    assert kernels - uses_adamw == {v.path for v in model.trainable_variables
                                   if v.path.endswith("/kernel") and "output_projection" not in v.path}
    assert {"token_embedding/embeddings", "output_projection/kernel"} <= uses_adamw


def _fit(optimizer):
    keras.utils.set_random_seed(0)
    model = kt.Transformer(vocabulary_size=40, d_model=16, num_heads=2, d_ff=32,
                           num_layers=1, max_length=16)
    model.compile(optimizer=optimizer, loss=kt.LabelSmoothedCrossEntropy(0.1))
    rng = np.random.default_rng(2)
    ids = rng.integers(1, 40, (3, 8, 6)).astype("int32")
    history = model.fit({"encoder_token_ids": ids[0], "decoder_token_ids": ids[1]}, ids[2],
                        batch_size=4, epochs=6, shuffle=False, verbose=0)
    return model, history.history["loss"]


def test_fits_and_saves_with_its_state_on_any_backend(tmp_path):
    # Twice, with the moving average: on JAX the second `fit` starts from
    # weights that the first wrote the average into (`OwnAverageBuffers`).
    model, losses = _fit(kt.transformer_muon(16, warmup_steps=2, peak=1e-2, use_ema=True))
    assert losses[-1] < 0.9 * losses[0]
    model.fit({"encoder_token_ids": np.ones((4, 6), "int32"),
               "decoder_token_ids": np.ones((4, 6), "int32")}, np.ones((4, 6), "int32"),
              verbose=0)
    assert_optimizer_round_trips(model, tmp_path / "model.keras", kt.optimizers.Muon)


@pytest.mark.parametrize("make", [kt.transformer_adam, kt.transformer_muon])
def test_both_take_the_papers_schedule_accumulation_and_adam(make):
    optimizer = make(64, 200, peak=2e-3, gradient_accumulation_steps=2, use_ema=True,
                     ema_momentum=0.81)
    schedule = optimizer._learning_rate
    assert isinstance(schedule, kt.WarmupSchedule) and schedule.steps_per_update == 2
    assert schedule.peak == pytest.approx(2e-3)
    assert optimizer.gradient_accumulation_steps == 2
    assert optimizer.ema_momentum == pytest.approx(0.9)  # per batch: 0.81 an update
    betas = ((optimizer.beta_1, optimizer.beta_2) if make is kt.transformer_adam
             else (optimizer.adam_beta_1, optimizer.adam_beta_2))
    assert betas + (optimizer.epsilon,) == (0.9, 0.98, 1e-9)
    assert optimizer.weight_decay is None
