"""Copying weights between keras-hub's backbones and ours, for parity tests.

keras-hub keeps attention kernels per head, `(d_model, heads, head_dim)`
and `(heads, head_dim, d_model)`; ours are `(d_model, heads * head_dim)`
and `(heads * head_dim, d_model)`: the same numbers, reshaped.
"""

import numpy as np

from tests.helpers import to_numpy


def _set(variable, value):
    variable.assign(np.reshape(to_numpy(value), variable.shape))


def copy_attention(theirs, ours):
    """keras-hub's (keras) `MultiHeadAttention` into our `MultiHeadAttention`."""
    for their_dense, our_dense in [
        (theirs._query_dense, ours.query_dense), (theirs._key_dense, ours.key_dense),
        (theirs._value_dense, ours.value_dense), (theirs._output_dense, ours.output_dense),
    ]:
        _set(our_dense.kernel, their_dense.kernel)
        _set(our_dense.bias, their_dense.bias)


def copy_norm(theirs, ours):
    _set(ours.gamma, theirs.gamma)
    _set(ours.beta, theirs.beta)


def copy_dense(theirs, ours):
    _set(ours.kernel, theirs.kernel)
    _set(ours.bias, theirs.bias)


def copy_block(theirs, ours):
    """A keras-hub `TransformerEncoder`/`TransformerDecoder` (no
    cross-attention) into our `EncoderBlock`."""
    copy_attention(theirs._self_attention_layer, ours.self_attention)
    copy_norm(theirs._self_attention_layer_norm, ours.self_attention_norm)
    copy_dense(theirs._feedforward_intermediate_dense, ours.feed_forward.inner_dense)
    copy_dense(theirs._feedforward_output_dense, ours.feed_forward.output_dense)
    copy_norm(theirs._feedforward_layer_norm, ours.feed_forward_norm)


def randomize(model, scale=0.2, seed=0):
    """Every weight of `model` plus noise, so no parity holds by accident
    (zero biases, unit LayerNorm scales)."""
    rng = np.random.default_rng(seed)
    model.set_weights([
        w + rng.normal(scale=scale, size=w.shape).astype(w.dtype)
        for w in model.get_weights()
    ])
