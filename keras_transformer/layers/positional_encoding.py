"""Positional encodings added to the embeddings (paper section 3.5)."""

import keras
from keras import ops

from keras_transformer.checks import check_positive_int

# The root mean square of the sinusoid's entries: each dimension is a sine
# or cosine over the positions, whose mean square is 1/2.
SINUSOID_STDDEV = 0.5**0.5


@keras.saving.register_keras_serializable(package="keras_transformer")
class PositionalEncoding(keras.layers.Layer):
    """Adds position information to a sequence of embeddings.

    The paper's sinusoid (section 3.5), interleaved as in equation (3.5):

        PE(pos, 2i)   = sin(pos / 10000^(2i / d_model))
        PE(pos, 2i+1) = cos(pos / 10000^(2i / d_model))

    so even dimensions carry sines and odd ones cosines. With
    `learned=True` it is instead a trained `(max_length, d_model)` table,
    Table 3 row (E).

    The sinusoid is computed from the positions on every call, so it extends
    past `max_length`; the learned table cannot, and a longer sequence
    raises a `ValueError`.

    Args:
        max_length: int, the longest sequence the learned table holds (the
            sinusoid needs no table but keeps the value for the config).
        learned: bool, a learned table instead of the sinusoid. Default
            False.
        base: float, the wavelength base, 10000 in the paper.
        embeddings_initializer: initializer of the learned table. Default:
            normal with standard deviation 0.02, as GPT and BERT start
            theirs; the `Transformer`, whose token embeddings have unit
            scale, starts its table at the sinusoid's scale instead
            (`SINUSOID_STDDEV`).
        **kwargs: passed to `keras.layers.Layer`.

    Call arguments:
        inputs: `(batch, seq, d_model)` embeddings.
        start_index: int or scalar tensor, the position of the first token
            (non-zero when decoding one token at a time). Default 0.

    Returns:
        `inputs + PE[start_index : start_index + seq]`, `(batch, seq, d_model)`.

    Example:
    >>> pe = PositionalEncoding(max_length=128)
    >>> pe(keras.ops.zeros((1, 3, 4)))[0, 1]  # sin 1, cos 1, sin .01, cos .01
    [0.84147, 0.54030, 0.0099998, 0.99995]
    """

    def __init__(self, max_length, learned=False, base=10000.0,
                 embeddings_initializer=None, **kwargs):
        super().__init__(**kwargs)
        check_positive_int("max_length", max_length)
        if not isinstance(learned, bool):
            raise ValueError(f"`learned` must be a bool. Received: learned={learned!r}")
        self.max_length = max_length
        self.learned = learned
        self.base = base
        self.embeddings_initializer = keras.initializers.get(
            embeddings_initializer or keras.initializers.RandomNormal(stddev=0.02))

    def build(self, inputs_shape):
        d_model = inputs_shape[-1]
        if self.learned:
            self.position_embeddings = self.add_weight(
                name="position_embeddings",
                shape=(self.max_length, d_model),
                initializer=self.embeddings_initializer,
            )
        self.built = True

    def sinusoid(self, positions, d_model):
        """The sinusoid table for `positions` `(seq,)`: `(seq, d_model)`."""
        dims = ops.arange(d_model, dtype="float32")
        # 2i / d_model for both dimension 2i and 2i+1.
        exponent = (dims - ops.mod(dims, 2.0)) / float(d_model)
        inverse_wavelength = ops.power(float(self.base), -exponent)  # (d_model,)
        # (seq, 1) * (1, d_model) --> (seq, d_model)
        angles = ops.cast(positions, "float32")[:, None] * inverse_wavelength[None, :]
        is_even = ops.equal(ops.mod(dims, 2.0), 0.0)[None, :]
        return ops.where(is_even, ops.sin(angles), ops.cos(angles))

    def call(self, inputs, start_index=0):
        seq_len, d_model = ops.shape(inputs)[1], inputs.shape[-1]
        positions = ops.arange(seq_len, dtype="int32") + start_index  # (seq,)
        if self.learned:
            if isinstance(seq_len, int) and isinstance(start_index, int) and (
                start_index + seq_len > self.max_length
            ):
                raise ValueError(
                    "A learned positional encoding holds at most "
                    f"max_length={self.max_length} positions; received a "
                    f"sequence of length {seq_len} starting at {start_index}. "
                    "Truncate the input or build the model with a larger "
                    "`max_length`."
                )
            table = ops.take(self.position_embeddings, positions, axis=0)
        else:
            table = self.sinusoid(positions, d_model)  # (seq, d_model)
        return inputs + ops.cast(table, inputs.dtype)[None, :, :]

    def compute_output_shape(self, inputs_shape):
        return inputs_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {"max_length": self.max_length, "learned": self.learned, "base": self.base,
             "embeddings_initializer": keras.initializers.serialize(
                 self.embeddings_initializer)}
        )
        return config
