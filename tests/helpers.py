"""Small helpers that keep each test short."""

import keras
import numpy as np


def to_numpy(x):
    return keras.ops.convert_to_numpy(x)


def gradients(function, *inputs):
    """The gradients of a scalar `function(*inputs)` with respect to each
    float32 array in `inputs`, by the current backend's autodiff, as NumPy."""
    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        grads = jax.grad(function, argnums=tuple(range(len(inputs))))(*inputs)
        return [np.asarray(g) for g in grads]
    if backend == "tensorflow":
        import tensorflow as tf

        tensors = [tf.constant(x) for x in inputs]
        with tf.GradientTape() as tape:
            for tensor in tensors:
                tape.watch(tensor)
            value = function(*tensors)
        return [g.numpy() for g in tape.gradient(value, tensors)]
    import torch

    tensors = [torch.tensor(x, requires_grad=True) for x in inputs]
    function(*tensors).backward()
    return [t.grad.numpy() for t in tensors]


def assert_config_roundtrip(layer):
    """`from_config(get_config())` rebuilds a layer with the same config."""
    config = layer.get_config()
    clone = layer.__class__.from_config(config)
    assert clone.get_config() == config
    return clone


def numpy_layer_norm(x, gamma, beta, epsilon):
    mean = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + epsilon) * gamma + beta


def numpy_softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def numpy_moving_averages(steps, momentum):
    """Keras's `use_ema` rule over `steps`, each a list of weights: the
    average starts at the first step's weights, then average = m * average
    + (1 - m) * weights after every step. Returns the average after each."""
    averages = [steps[0]]
    for weights in steps[1:]:
        averages.append([momentum * a + (1 - momentum) * w
                         for a, w in zip(averages[-1], weights)])
    return averages


def numpy_attention(layer, query, value, mask, key=None):
    """Reference multi-head attention with the weights of `layer`.

    query (B, T, D), value (B, S, D), mask bool (B, T, S) or None, key
    (B, S, D) or None (= value).
    Returns output (B, T, D_out) and weights (B, h, T, S).
    """
    wq, bq, wk, bk, wv, bv, wo, bo = [
        to_numpy(w) for dense in (
            layer.query_dense, layer.key_dense, layer.value_dense,
            layer.output_dense,
        ) for w in (dense.kernel, dense.bias)
    ]
    h, dk = layer.num_heads, layer.key_dim
    dv = wv.shape[1] // h
    B, T, _ = query.shape
    S = value.shape[1]
    q = (query @ wq + bq).reshape(B, T, h, dk).transpose(0, 2, 1, 3)
    key = value if key is None else key
    k = (key @ wk + bk).reshape(B, S, h, dk).transpose(0, 2, 1, 3)
    v = (value @ wv + bv).reshape(B, S, h, dv).transpose(0, 2, 1, 3)
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(dk)  # (B, h, T, S)
    if mask is not None:
        scores = np.where(mask[:, None], scores, -1e9)
    weights = numpy_softmax(scores)
    out = (weights @ v).transpose(0, 2, 1, 3).reshape(B, T, h * dv)
    return out @ wo + bo, weights


# Two rows of three positions, vocabulary 4: the loss and metric tests' batch.
LOGITS = np.array(
    [[[2.0, 1.0, 0.1, -1.0], [0.5, 0.5, 3.0, 0.0], [1.0, 2.0, 3.0, 4.0]],
     [[0.0, 0.0, 0.0, 5.0], [1.0, -2.0, 0.3, 0.3], [9.0, 9.0, 9.0, 9.0]]],
    "float32",
)
LABELS = np.array([[1, 2, 0], [3, 1, 0]], "int32")  # 0 = padding


def subword_model(path):
    """The algorithm a SentencePiece model file was trained with, as its
    trainer spec records it: "UNIGRAM" or "BPE"."""
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()
    with open(path, "rb") as f:
        proto.ParseFromString(f.read())
    return sentencepiece_model_pb2.TrainerSpec.ModelType.Name(proto.trainer_spec.model_type)


def assert_optimizer_round_trips(model, path, optimizer_class):
    """`model` saved to `path` and loaded again holds an `optimizer_class`
    with the same config and the same state."""
    model.save(path)
    restored = keras.saving.load_model(path)
    assert type(restored.optimizer) is optimizer_class
    assert restored.optimizer.get_config() == model.optimizer.get_config()
    for a, b in zip(restored.optimizer.variables, model.optimizer.variables, strict=True):
        np.testing.assert_array_equal(to_numpy(a), to_numpy(b))
