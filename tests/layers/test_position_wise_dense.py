import keras
import numpy as np
import pytest

from keras_transformer.layers import PositionWiseDense
from keras_transformer.layers import position_wise_dense
from keras_transformer.layers.position_wise_dense import (
    MIN_CONVOLUTION_POSITIONS, position_wise_matmul)
from tests.helpers import assert_config_roundtrip, gradients, to_numpy

# (batch, len, d_in): 6 positions, and 320, past MIN_CONVOLUTION_POSITIONS.
SMALL, LARGE = (2, 3, 8), (4, 80, 8)


@pytest.fixture
def convolutions(monkeypatch):
    """Counts the calls of keras.ops.conv while the test runs, on a CPU
    taken for AMD's, where PyTorch's large products are convolutions."""
    monkeypatch.setattr(position_wise_dense, "_amd_cpu", lambda: True)
    calls = []
    conv = keras.ops.conv

    def counting(*args, **kwargs):
        calls.append(args[0].shape)
        return conv(*args, **kwargs)

    monkeypatch.setattr(position_wise_dense.ops, "conv", counting)
    return calls


@pytest.mark.parametrize("shape", [SMALL, LARGE])
def test_matmul_and_its_gradients_match_numpy(shape, convolutions):
    rng = np.random.default_rng(0)
    x = rng.normal(size=shape).astype("float32")
    kernel = rng.normal(size=(8, 5)).astype("float32")
    weights = rng.normal(size=shape[:-1] + (5,)).astype("float32")
    product = position_wise_matmul(keras.ops.convert_to_tensor(x), kernel)
    np.testing.assert_allclose(to_numpy(product), x @ kernel, atol=1e-5)
    # d sum(weights * x W) / dx = weights W^T, / dW = sum over positions x^T weights
    dx, dkernel = gradients(
        lambda x, k: keras.ops.sum(keras.ops.multiply(position_wise_matmul(x, k), weights)),
        x, kernel)
    np.testing.assert_allclose(dx, weights @ kernel.T, atol=1e-5)
    np.testing.assert_allclose(dkernel, np.einsum("bti,bto->io", x, weights), atol=1e-4)
    # On PyTorch with an AMD CPU the large product (forward, twice) is a 1 x 1
    # convolution.
    on_torch = keras.backend.backend() == "torch"
    large = np.prod(shape[:-1]) >= MIN_CONVOLUTION_POSITIONS
    assert len(convolutions) == (2 if on_torch and large else 0)


def test_a_large_product_stays_a_matmul_on_other_cpus(monkeypatch, convolutions):
    # Where MKL runs at full speed (an Intel Xeon) the matmul was the faster.
    monkeypatch.setattr(position_wise_dense, "_amd_cpu", lambda: False)
    x = np.random.default_rng(3).normal(size=LARGE).astype("float32")
    kernel = np.eye(8, 5, dtype="float32")
    product = position_wise_matmul(keras.ops.convert_to_tensor(x), kernel)
    np.testing.assert_allclose(to_numpy(product), x[..., :5], atol=1e-6)
    assert convolutions == []


def test_batch_axes_fold_into_one_matrix_product(monkeypatch, convolutions):
    """`(batch, seq, d_in)` multiplies as one `(batch * seq, d_in)` matrix:
    with the batch axes kept, XLA on JAX copied the logits' gradient into a
    transposed layout (docs/RESULTS.md)."""
    ranks = []
    matmul = keras.ops.matmul

    def recording(a, b):
        ranks.append((len(a.shape), len(b.shape)))
        return matmul(a, b)

    monkeypatch.setattr(position_wise_dense.ops, "matmul", recording)
    x = np.arange(np.prod(SMALL), dtype="float32").reshape(SMALL)
    kernel = np.eye(8, 5, dtype="float32")
    product = position_wise_matmul(keras.ops.convert_to_tensor(x), kernel)
    np.testing.assert_array_equal(to_numpy(product), x[..., :5])
    assert ranks == [(2, 2)]


def test_bfloat16_matches_float32(convolutions):
    rng = np.random.default_rng(1)
    x = rng.normal(size=LARGE).astype("float32")
    kernel = rng.normal(size=(8, 5)).astype("float32")
    low = position_wise_matmul(keras.ops.cast(x, "bfloat16"),
                               keras.ops.cast(kernel, "bfloat16"))
    assert keras.backend.standardize_dtype(low.dtype) == "bfloat16"
    np.testing.assert_allclose(to_numpy(keras.ops.cast(low, "float32")), x @ kernel,
                               rtol=0.02, atol=0.1)
    assert len(convolutions) == (1 if keras.backend.backend() == "torch" else 0)


def test_layer_equals_keras_dense_with_the_same_weights():
    x = np.random.default_rng(2).normal(size=LARGE).astype("float32")
    ours = PositionWiseDense(6, activation="relu")
    reference = keras.layers.Dense(6, activation="relu")
    ours.build(LARGE)
    reference.build(LARGE)
    reference.set_weights(ours.get_weights())
    assert [w.path.split("/")[-1] for w in ours.weights] == ["kernel", "bias"]
    np.testing.assert_allclose(to_numpy(ours(x)), to_numpy(reference(x)), atol=1e-5)
    assert_config_roundtrip(ours)


def test_a_compiled_product_is_a_matmul(convolutions):
    """Compiled (TensorFlow's graph mode with sizes known only when run,
    `torch.compile` with dynamic sizes, `jax.jit`), the product is a
    matmul, which every compiler takes at any size: inductor failed on
    the convolution's layout in a training step."""
    x = np.random.default_rng(4).normal(size=LARGE).astype("float32")
    kernel = np.random.default_rng(5).normal(size=(8, 5)).astype("float32")
    backend = keras.backend.backend()
    if backend == "torch":
        import torch

        traced = torch.compile(position_wise_matmul, dynamic=True)
    elif backend == "tensorflow":
        import tensorflow as tf

        traced = tf.function(position_wise_matmul, input_signature=[
            tf.TensorSpec((None, None, 8)), tf.TensorSpec((8, 5))])
    else:  # JAX traces with every size known
        import jax

        traced = jax.jit(position_wise_matmul)
    product = traced(keras.ops.convert_to_tensor(x), keras.ops.convert_to_tensor(kernel))
    np.testing.assert_allclose(to_numpy(product), x @ kernel, atol=1e-5)
    assert convolutions == []
