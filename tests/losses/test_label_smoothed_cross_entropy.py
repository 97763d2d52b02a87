import keras
import numpy as np
import pytest

from keras_transformer import LabelSmoothedCrossEntropy
from tests.helpers import LABELS, LOGITS, gradients, to_numpy


def hand_computed(epsilon, logits=LOGITS):
    """Cross-entropy against the smoothed distribution, averaged over the four
    real tokens, written out the long way (in float64)."""
    logits = logits.astype("float64")
    vocab = logits.shape[-1]
    total, count = 0.0, 0
    for b in range(2):
        for t in range(3):
            if LABELS[b, t] == 0:
                continue
            shifted = logits[b, t] - logits[b, t].max()
            log_p = shifted - np.log(np.exp(shifted).sum())
            target = np.full(vocab, epsilon / vocab)
            target[LABELS[b, t]] += 1.0 - epsilon
            total += -(target * log_p).sum()
            count += 1
    return total / count


def smoothed_loss(epsilon=0.1, keep_softmax=None):
    """The loss, with its softmax kept from the forward pass (PyTorch's
    form) or recomputed in the backward pass (XLA's), whatever the backend;
    None: the current backend's form."""
    loss = LabelSmoothedCrossEntropy(epsilon=epsilon)
    if keep_softmax is not None:
        loss._keep_softmax = keep_softmax
    return loss


@pytest.mark.parametrize("keep_softmax", [False, True])
@pytest.mark.parametrize("epsilon", [0.0, 0.1, 0.2])
def test_loss_matches_hand_computation(epsilon, keep_softmax):
    loss = smoothed_loss(epsilon, keep_softmax)
    assert float(to_numpy(loss(LABELS, LOGITS))) == pytest.approx(
        hand_computed(epsilon), rel=1e-5
    )


def test_loss_keeps_the_softmax_on_pytorch_only():
    assert LabelSmoothedCrossEntropy()._keep_softmax == (keras.backend.backend() == "torch")


def test_loss_equals_keras_dense_label_smoothing_without_padding():
    labels = np.array([[1, 2, 3]], "int32")
    logits = LOGITS[:1]
    ours = LabelSmoothedCrossEntropy(epsilon=0.1)(labels, logits)
    dense = keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=0.1)(
        keras.ops.one_hot(labels, 4), logits
    )
    assert float(to_numpy(ours)) == pytest.approx(float(to_numpy(dense)), rel=1e-5)


def logits_gradient(loss, labels, logits):
    """d loss / d logits, by the current backend's autodiff."""
    return gradients(lambda z: loss(labels, z), logits)[0]


def hand_computed_gradient(epsilon, logits):
    """d/dz of the mean smoothed loss, in float64: (softmax(z) - target) /
    real tokens at real positions, exactly 0 at padding."""
    logits = logits.astype("float64")
    vocab = logits.shape[-1]
    expected = np.zeros_like(logits)
    for b, t in zip(*np.nonzero(LABELS)):
        target = np.full(vocab, epsilon / vocab)
        target[LABELS[b, t]] += 1.0 - epsilon
        softmax = np.exp(logits[b, t] - logits[b, t].max())
        expected[b, t] = (softmax / softmax.sum() - target) / np.count_nonzero(LABELS)
    return expected


@pytest.mark.parametrize("keep_softmax", [False, True])
def test_loss_gradient_is_softmax_minus_smoothed_target(keep_softmax):
    grad = logits_gradient(smoothed_loss(0.1, keep_softmax), LABELS, LOGITS)
    np.testing.assert_allclose(grad, hand_computed_gradient(0.1, LOGITS), atol=1e-6)


def test_loss_gradient_twice_from_one_forward_pass():
    # On PyTorch the first gradient is written into the kept softmax; a
    # second (autograd's `retain_graph`) recomputes it.
    loss, backend = smoothed_loss(0.1), keras.backend.backend()
    if backend == "torch":
        import torch

        logits = torch.tensor(LOGITS, requires_grad=True)
        value = loss(torch.tensor(LABELS), logits)
        grads = [torch.autograd.grad(value, logits, retain_graph=True)[0].numpy()
                 for _ in range(2)]
    elif backend == "tensorflow":
        import tensorflow as tf

        logits = tf.constant(LOGITS)
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(logits)
            value = loss(LABELS, logits)
        grads = [tape.gradient(value, logits).numpy() for _ in range(2)]
    else:
        import jax

        _, backward = jax.vjp(lambda z: loss(LABELS, z), LOGITS)
        grads = [np.asarray(backward(np.float32(1.0))[0]) for _ in range(2)]
    for grad in grads:
        np.testing.assert_allclose(grad, hand_computed_gradient(0.1, LOGITS), atol=1e-6)


@pytest.mark.parametrize("keep_softmax", [False, True])
def test_loss_at_large_logits(keep_softmax):
    # At z + 100 a naive exp(z) overflows float32; the reference is float64
    # NumPy on the same (float32-rounded) logits.
    loss = smoothed_loss(0.1, keep_softmax)
    shifted = LOGITS + np.float32(100)
    assert float(to_numpy(loss(LABELS, shifted))) == pytest.approx(
        hand_computed(0.1, shifted), rel=1e-5)
    np.testing.assert_allclose(logits_gradient(loss, LABELS, shifted),
                               hand_computed_gradient(0.1, shifted), atol=1e-6)


def test_loss_sample_weight_and_all_padding():
    loss = LabelSmoothedCrossEntropy(epsilon=0.1)
    weighted = loss(LABELS, LOGITS, sample_weight=np.array([1.0, 0.0]))
    first_only = loss(LABELS[:1], LOGITS[:1])
    assert float(to_numpy(weighted)) == pytest.approx(float(to_numpy(first_only)), rel=1e-5)
    assert float(to_numpy(loss(np.zeros((2, 3), "int32"), LOGITS))) == 0.0


def test_loss_config_and_bad_epsilon():
    config = LabelSmoothedCrossEntropy(epsilon=0.2, pad_id=5).get_config()
    assert LabelSmoothedCrossEntropy.from_config(config).get_config() == config
    with pytest.raises(ValueError, match="epsilon=1.0"):
        LabelSmoothedCrossEntropy(epsilon=1.0)
