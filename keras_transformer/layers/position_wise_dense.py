"""Position-wise linear maps (paper section 3.3): every projection in the
model applies one matrix to each position alike."""

import functools
import math
import platform

import keras
from keras import ops


# Fewer positions than this multiply faster as a matmul on PyTorch's CPU
# (a decoding step's batch x beam rows, say): the convolution's fixed cost
# outweighs its speed there (docs/RESULTS.md).
MIN_CONVOLUTION_POSITIONS = 256


def position_wise_matmul(x, kernel):
    """`x @ kernel`: `(..., d_in) @ (d_in, d_out) --> (..., d_out)`.

    Section 3.3 describes such a map as "a convolution with kernel size 1",
    and on PyTorch with an AMD CPU that is how it runs, from
    `MIN_CONVOLUTION_POSITIONS` positions on: PyTorch hands float32 matmuls
    to MKL, which on AMD CPUs runs at about half the speed of the same
    product as a oneDNN convolution. On an Intel CPU MKL runs at full
    speed and the matmul was the faster (docs/RESULTS.md). Under XLA, where
    a convolution gained nothing, and on GPUs it stays a matmul.
    """
    shape = tuple(x.shape)
    if None in shape:  # a dynamic shape: TensorFlow's graph mode
        return ops.matmul(x, kernel)
    positions = math.prod(shape[:-1])
    out_shape = shape[:-1] + (kernel.shape[-1],)
    # As one `(positions, d_in)` matrix: with the batch axes kept, XLA's CPU
    # backend on JAX copies the `(batch, seq, V)` gradient of the logits into
    # a transposed layout for the weight gradient, 8% of the training step
    # (docs/RESULTS.md).
    rows = ops.reshape(x, (positions, shape[-1]))
    if positions < MIN_CONVOLUTION_POSITIONS or not _on_pytorch_amd_cpu(x):
        return ops.reshape(ops.matmul(rows, kernel), out_shape)
    # All positions as one (1, positions, 1, d_in) image, viewed as
    # channels-first (1, d_in, positions, 1): no copy, and oneDNN reads the
    # channels-last memory as it lies.
    image = ops.transpose(ops.reshape(rows, (1, positions, 1, shape[-1])), (0, 3, 1, 2))
    # (1, d_out, positions, 1)
    out = ops.conv(image, kernel[None, None], data_format="channels_first")
    return ops.reshape(ops.transpose(out, (0, 2, 3, 1)), out_shape)


def states_at(sequence, positions):
    """The states at some positions of each row: `(batch, seq, d)` and int
    `(batch, n)` --> `(batch, n, d)`."""
    return ops.take_along_axis(sequence, ops.cast(positions, "int32")[:, :, None], axis=1)


def _on_pytorch_amd_cpu(x):
    """Whether the product runs as a convolution: on PyTorch with an AMD
    CPU, eagerly. Under `torch.compile` (`jit_compile=True`) inductor
    failed to lay out the convolution of a training step."""
    if keras.backend.backend() != "torch":
        return False
    import torch

    device = getattr(x, "device", None)  # None for a NumPy array
    return (getattr(device, "type", None) == "cpu" and not torch.compiler.is_compiling()
            and _amd_cpu())


@functools.cache
def _amd_cpu():
    try:
        with open("/proc/cpuinfo") as f:
            cpu = f.read()
    except OSError:  # not Linux; on Windows the name ends with the vendor
        cpu = platform.processor()
    return "AuthenticAMD" in cpu


@keras.saving.register_keras_serializable(package="keras_transformer")
class PositionWiseDense(keras.layers.Dense):
    """`keras.layers.Dense` whose product is `position_wise_matmul`: the
    same weights, config and `.keras` layout, a convolution with kernel
    size 1 on PyTorch with an AMD CPU.

    Example:
    >>> layer = PositionWiseDense(8)
    >>> layer(keras.ops.ones((2, 5, 4))).shape
    (2, 5, 8)
    """

    def call(self, inputs, training=None):
        x = position_wise_matmul(inputs, self.kernel)
        if self.bias is not None:
            x = ops.add(x, self.bias)
        if self.activation is not None:
            x = self.activation(x)
        return x
