"""Position-wise feed-forward network (paper section 3.3), and its gated
form."""

import keras

from keras_transformer.checks import check_positive_int
from keras_transformer.layers.position_wise_dense import PositionWiseDense


@keras.saving.register_keras_serializable(package="keras_transformer")
def gelu_approximate(x):
    """GELU by its tanh approximation, as GPT and BERT's released code
    compute it; Keras's "gelu" is the exact, erf-based one."""
    return keras.activations.gelu(x, approximate=True)


@keras.saving.register_keras_serializable(package="keras_transformer")
class FeedForward(keras.layers.Layer):
    """`FFN(x) = max(0, x W1 + b1) W2 + b2`, applied at every position.

    Section 3.3, equation (2): two linear maps with a ReLU between them;
    the inner width is `d_ff` (2048 in the base model) and the output width
    is the input's (`d_model`). The section also describes them as two
    convolutions with kernel size 1, which is how `PositionWiseDense` runs
    them on PyTorch's CPU.

    `gated=True` gives the gated linear unit form, not in the paper:
    `FFN(x) = (act(x W1 + b1) * (x V + c)) W2 + b2`, an inner product more
    per position. With `activation="silu"` this is SwiGLU; at two thirds
    of the ungated `d_ff` it has the same weights and FLOPs.

    Args:
        d_ff: int, the inner width.
        activation: the activation between the two maps: "relu" as in the
            paper, "gelu" or `gelu_approximate` (GPT, BERT), "silu", or
            any Keras activation.
        gated: bool, multiply the activation by a second linear map of the
            input (`V`, `c`). Default False, the paper's network.
        **kwargs: passed to `keras.layers.Layer`.

    Call arguments:
        inputs: `(batch, seq, d_model)`.

    Returns:
        `(batch, seq, d_model)`.

    Example:
    >>> FeedForward(d_ff=2048)(keras.ops.ones((2, 5, 512))).shape
    (2, 5, 512)
    """

    def __init__(self, d_ff, activation="relu", gated=False, **kwargs):
        super().__init__(**kwargs)
        check_positive_int("d_ff", d_ff)
        self.d_ff = d_ff
        self.activation = keras.activations.get(activation)
        self.gated = gated

    def build(self, inputs_shape):
        d_model = inputs_shape[-1]
        self.inner_dense = PositionWiseDense(
            self.d_ff, activation=self.activation, name="inner",
            dtype=self.dtype_policy,
        )  # W1, b1
        self.inner_dense.build(inputs_shape)
        self.linear_dense = None
        if self.gated:
            # V, c as a product of its own: as one product of twice the
            # width, sliced, mini's training step was 6-10% slower on a CPU,
            # and this form level with the ungated one (docs/RESULTS.md).
            self.linear_dense = PositionWiseDense(
                self.d_ff, name="linear", dtype=self.dtype_policy)
            self.linear_dense.build(inputs_shape)
        self.output_dense = PositionWiseDense(
            d_model, name="output", dtype=self.dtype_policy
        )  # W2, b2
        self.output_dense.build(tuple(inputs_shape[:-1]) + (self.d_ff,))
        self.built = True

    def call(self, inputs):
        hidden = self.inner_dense(inputs)  # (batch, seq, d_ff)
        if self.gated:
            hidden = hidden * self.linear_dense(inputs)
        return self.output_dense(hidden)

    def compute_output_shape(self, inputs_shape):
        return inputs_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "d_ff": self.d_ff,
                "activation": keras.activations.serialize(self.activation),
                "gated": self.gated,
            }
        )
        return config
