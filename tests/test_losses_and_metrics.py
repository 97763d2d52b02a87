import keras
import numpy as np
import pytest

from keras_transformer import LabelSmoothedCrossEntropy, MaskedAccuracy
from tests.helpers import to_numpy

LOGITS = np.array(
    [[[2.0, 1.0, 0.1, -1.0], [0.5, 0.5, 3.0, 0.0], [1.0, 2.0, 3.0, 4.0]],
     [[0.0, 0.0, 0.0, 5.0], [1.0, -2.0, 0.3, 0.3], [9.0, 9.0, 9.0, 9.0]]],
    "float32",
)
LABELS = np.array([[1, 2, 0], [3, 1, 0]], "int32")  # 0 = padding


def hand_computed(epsilon):
    """Cross-entropy against the smoothed distribution, averaged over the four
    real tokens, written out the long way."""
    vocab = LOGITS.shape[-1]
    total, count = 0.0, 0
    for b in range(2):
        for t in range(3):
            if LABELS[b, t] == 0:
                continue
            log_p = LOGITS[b, t] - np.log(np.exp(LOGITS[b, t]).sum())
            target = np.full(vocab, epsilon / vocab)
            target[LABELS[b, t]] += 1.0 - epsilon
            total += -(target * log_p).sum()
            count += 1
    return total / count


@pytest.mark.parametrize("epsilon", [0.0, 0.1, 0.2])
def test_loss_matches_hand_computation(epsilon):
    loss = LabelSmoothedCrossEntropy(epsilon=epsilon)
    assert float(to_numpy(loss(LABELS, LOGITS))) == pytest.approx(
        hand_computed(epsilon), rel=1e-5
    )


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
    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        return np.asarray(jax.grad(lambda z: loss(labels, z))(logits))
    if backend == "tensorflow":
        import tensorflow as tf

        z = tf.constant(logits)
        with tf.GradientTape() as tape:
            tape.watch(z)
            value = loss(labels, z)
        return tape.gradient(value, z).numpy()
    import torch

    z = torch.tensor(logits, requires_grad=True)
    loss(torch.tensor(labels), z).backward()
    return z.grad.numpy()


def test_loss_gradient_is_softmax_minus_smoothed_target():
    # d/dz of the mean smoothed loss: (softmax(z) - target) / real tokens at
    # real positions, exactly 0 at padding.
    epsilon, vocab = 0.1, LOGITS.shape[-1]
    grad = logits_gradient(LabelSmoothedCrossEntropy(epsilon=epsilon), LABELS, LOGITS)
    expected = np.zeros_like(LOGITS)
    for b, t in zip(*np.nonzero(LABELS)):
        target = np.full(vocab, epsilon / vocab)
        target[LABELS[b, t]] += 1.0 - epsilon
        softmax = np.exp(LOGITS[b, t]) / np.exp(LOGITS[b, t]).sum()
        expected[b, t] = (softmax - target) / np.count_nonzero(LABELS)
    np.testing.assert_allclose(grad, expected, atol=1e-6)


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


def test_masked_accuracy_ignores_padding():
    metric = MaskedAccuracy()
    # argmax: [[0, 2, 3], [3, 0, 0]]; real labels [1, 2] and [3, 1]: 2 of 4
    metric.update_state(LABELS, LOGITS)
    assert float(to_numpy(metric.result())) == pytest.approx(0.5)
    metric.update_state(np.array([[2, 0, 0]]), LOGITS[:1])
    assert float(to_numpy(metric.result())) == pytest.approx(2 / 5)
    config = metric.get_config()
    assert MaskedAccuracy.from_config(config).get_config() == config


def test_masked_accuracy_sample_weight():
    metric = MaskedAccuracy()
    # Row 0 alone: argmax [0, 2] against labels [1, 2] -> 1 of 2.
    metric.update_state(LABELS, LOGITS, sample_weight=np.array([1.0, 0.0]))
    assert float(to_numpy(metric.result())) == pytest.approx(0.5)
    assert float(to_numpy(metric.count)) == pytest.approx(2.0)
