"""Dropout (paper section 5.4, "Residual Dropout") whose random bits come
from a keyed hash of each element's index."""

import keras
from keras import ops

from keras_transformer.checks import check_rate

# Each 32-bit hash gives two 16-bit uniforms, one per element.
_BITS = 16
_LEVELS = 2**_BITS
_SEED_STATE = "seed_generator_state"  # its key in a saved model's store


def _shift_right_logical(x, shift):
    """`x >> shift` for an int32 `x` read as uint32: zeros shifted in."""
    return ops.bitwise_and(ops.right_shift(x, shift), (1 << (32 - shift)) - 1)


def _mix(x):
    """A bijection of 32-bit integers in which every input bit flips about
    half the output bits (C. Wellons' "lowbias32": xor-shift, multiply,
    xor-shift, multiply, xor-shift). int32 products wrap modulo 2^32 on
    every backend, so int32 arithmetic gives the uint32 result's bits."""
    x = ops.bitwise_xor(x, _shift_right_logical(x, 16))
    x = x * 0x7FEB352D
    x = ops.bitwise_xor(x, _shift_right_logical(x, 15))
    x = x * (0x846CA68B - 2**32)  # the uint32 constant as an int32
    return ops.bitwise_xor(x, _shift_right_logical(x, 16))


def keyed_hash(counter, key):
    """32 random bits (an int32) for each int32 `counter`, given an int32
    `key` of shape `(2,)`: `mix(mix(counter + key[0]) ^ key[1])`.

    A counter-based generator, as Philox and Threefry (the generators
    behind `keras.random`) are: the bits of element `i` are a keyed
    bijection of `i`, computed in parallel with a few integer operations.
    For a fixed key, distinct counters never share bits.
    """
    return _mix(ops.bitwise_xor(_mix(counter + key[0]), key[1]))


def _traced_by_tensorflow_without_xla():
    """Whether this call is being traced into a TensorFlow graph that XLA
    will not compile: Keras's `fit` with `jit_compile=False`, its default
    on a CPU-only TensorFlow. TensorFlow has no public test for an XLA
    trace; `tf.function(jit_compile=True)` traces inside an XLA control
    flow context, which `control_flow_util` looks for."""
    if keras.backend.backend() != "tensorflow":
        return False
    import tensorflow as tf
    from tensorflow.python.ops import control_flow_util

    return not tf.executing_eagerly() and not control_flow_util.GraphOrParentsInXlaContext(
        tf.compat.v1.get_default_graph())


@keras.saving.register_keras_serializable(package="keras_transformer")
class Dropout(keras.layers.Layer):
    """Inverted dropout: zeroes each element with probability `rate` during
    training and scales the rest by `1 / (1 - rate)`.

    Section 5.4 applies dropout to the output of every sub-layer, before the
    residual addition, and to the sums of the embeddings and positional
    encodings.

    Where the random bits come from: `keras.random` draws a two-int32 key
    per call (from the layer's seed), and each pair of neighbouring
    elements (in row-major order) takes its bits from `keyed_hash` of the
    pair's index: a 16-bit uniform each. Under XLA the hash fuses into the
    elementwise work around it, where drawing every bit from `keras.random`
    was a sizeable part of the training step (docs/RESULTS.md). In a
    TensorFlow graph that XLA does not compile (Keras's default `fit` on a
    CPU) each of the hash's integer operations is a kernel of its own,
    which made `mini`'s step slower than TensorFlow's one stateless
    dropout kernel (docs/RESULTS.md); such a trace takes
    `keras.random.dropout` at the exact rate, drawn from the same seed
    generator, so its masks still follow the saved random state.

    An element is kept when its uniform is below `round((1 - rate) * 2^16)`,
    so the dropout rate is rounded to a multiple of `2^-16` (0.1 becomes
    0.100006); the kept elements are scaled by the inverse of that rounded
    keep probability, which keeps the expectation exact.

    A compiled step holds the rate it was traced with, and at rate 0 it
    has no dropout at all. With `variable_rate = True` the layer masks at
    every rate, 0 included, reading the threshold from its `keep_threshold`
    variable: a compiled step then follows a new rate with no new trace
    (under XLA, no compile of every batch shape again). That variable is
    layer state, as the seed's is, not a weight: it is left out of
    `weights` and of the saved weights, and is set from `rate`.

    Args:
        rate: float in `[0, 1)`, the probability of dropping an element.
        seed: int or None, the seed of the layer's random numbers.
        **kwargs: passed to `keras.layers.Layer`.

    Call arguments:
        inputs: a float tensor of any shape `(..., d)`.
        training: bool, dropout is applied only when True.

    Returns:
        A tensor of the shape and dtype of `inputs`.

    Example:
    >>> dropout = Dropout(0.5, seed=0)
    >>> y = dropout(keras.ops.ones((2, 4)), training=True)  # 0s and 2s
    >>> sorted(set(keras.ops.convert_to_numpy(y).ravel().tolist()))
    [0.0, 2.0]
    """

    def __init__(self, rate, seed=None, **kwargs):
        super().__init__(**kwargs)
        self.keep_threshold = self.add_weight(
            shape=(), dtype="int32", initializer="zeros", trainable=False, name="keep_threshold")
        self.rate = rate
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)
        self.variable_rate = False  # a training run's setting, not saved
        self.supports_masking = True
        self.built = True

    @property
    def weights(self):
        return [w for w in super().weights if w is not self.keep_threshold]

    @property
    def rate(self):
        return self._rate

    @rate.setter
    def rate(self, rate):
        """A new rate applies to the next call, and to a compiled training
        step once it is traced again, or at once with `variable_rate`
        (`ModelBase.set_dropout_rate`)."""
        check_rate("rate", rate)
        self._rate = rate
        # The largest 16-bit uniform that is kept, plus one.
        self.threshold = round((1.0 - rate) * _LEVELS)
        self.keep_threshold.assign(self.threshold)

    def call(self, inputs, training=False):
        if not training or (self.threshold == _LEVELS and not self.variable_rate):
            return inputs
        if self.threshold == 0 and not self.variable_rate:  # rate > 1 - 2^-17: all dropped
            return ops.zeros_like(inputs)
        if not self.variable_rate and _traced_by_tensorflow_without_xla():
            return keras.random.dropout(inputs, self.rate, seed=self.seed_generator)
        shape = ops.shape(inputs)  # its sizes may be known only at run time
        size = ops.size(inputs)
        key = keras.random.randint(
            (2,), 0, 2**31 - 1, dtype="int32", seed=self.seed_generator
        )
        # (ceil(n / 2), 1): the index of each pair of elements, in row-major order
        counter = ops.reshape(ops.arange((size + 1) // 2, dtype="int32"), (-1, 1))
        # (ceil(n / 2), 2): the low and the high 16 bits of each hash
        shifts = ops.convert_to_tensor([0, _BITS], "int32")
        uniforms = ops.bitwise_and(ops.right_shift(keyed_hash(counter, key), shifts), _LEVELS - 1)
        uniforms = ops.reshape(uniforms, (-1,))  # (2 ceil(n / 2),)
        if not isinstance(inputs.shape[-1], int) or inputs.shape[-1] % 2:
            uniforms = uniforms[:size]  # an odd n has one uniform too many
        uniforms = ops.reshape(uniforms, shape)
        # 1 / keep or 0 per element; a multiply (rather than a select)
        # keeps the backward pass to one elementwise product.
        if self.variable_rate:  # a threshold of 0 keeps nothing, whatever the scale
            threshold = self.keep_threshold
            scale = _LEVELS / ops.maximum(ops.cast(threshold, "float32"), 1.0)
        else:
            threshold, scale = self.threshold, _LEVELS / self.threshold
        keep = ops.cast(uniforms < threshold, inputs.dtype)
        return inputs * (keep * ops.cast(scale, inputs.dtype))

    def compute_output_shape(self, inputs_shape):
        return inputs_shape

    # Keras saves no SeedGenerator state; this layer saves its own, so that
    # a model loaded from a checkpoint draws the masks the saved one would
    # have drawn next (exact resume with dropout on). It is the only
    # variable saved: `keep_threshold` comes from the config's rate.
    def save_own_variables(self, store):
        store[_SEED_STATE] = self.seed_generator.state

    def load_own_variables(self, store):
        if _SEED_STATE in list(store.keys()):  # files saved before it was have none
            self.seed_generator.state.assign(store[_SEED_STATE])

    def get_config(self):
        config = super().get_config()
        config.update({"rate": self.rate, "seed": self.seed})
        return config
