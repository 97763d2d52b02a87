"""Token embeddings scaled by sqrt(d_model), reusable as the output
projection (paper section 3.4)."""

import math

import keras
from keras import ops

from keras_transformer.checks import check_positive_int
from keras_transformer.layers.position_wise_dense import position_wise_matmul


@keras.saving.register_keras_serializable(package="keras_transformer")
class TokenEmbedding(keras.layers.Layer):
    """A learned embedding whose matrix doubles as the pre-softmax projection.

    Section 3.4: token ids are embedded into `d_model` dimensions and the
    result is multiplied by `sqrt(d_model)`; the same weight matrix `E`
    `(vocabulary_size, d_model)` serves the embedding layers and the
    pre-softmax linear transformation, which has no bias. The
    `Transformer` calls one instance for the source tokens, the target tokens
    and (with `reverse=True`) the output logits. GPT and BERT do not scale
    their embeddings (`scale=False`).

    Args:
        vocabulary_size: int, rows of `E`.
        d_model: int, columns of `E`.
        embeddings_initializer: initializer of `E`. Default: normal with
            standard deviation `d_model^-0.5`, so that the scaled embeddings
            have unit variance.
        scale: bool, multiply the embeddings by `sqrt(d_model)` (the paper,
            default).
        **kwargs: passed to `keras.layers.Layer`.

    Call arguments:
        inputs: int `(batch, seq)` token ids, or with `reverse=True` float
            `(batch, seq, d_model)` hidden states.
        reverse: bool, compute logits `inputs @ E^T` instead of embedding.

    Returns:
        `(batch, seq, d_model)` embeddings (times `sqrt(d_model)`), or with
        `reverse=True` `(batch, seq, vocabulary_size)` logits.

    Example:
    >>> emb = TokenEmbedding(vocabulary_size=100, d_model=16)
    >>> x = emb(keras.ops.array([[5, 7, 0]]))          # (1, 3, 16)
    >>> emb(x, reverse=True).shape
    (1, 3, 100)
    """

    def __init__(
        self, vocabulary_size, d_model, embeddings_initializer=None, scale=True,
        **kwargs
    ):
        super().__init__(**kwargs)
        check_positive_int("vocabulary_size", vocabulary_size)
        check_positive_int("d_model", d_model)
        self.vocabulary_size = vocabulary_size
        self.d_model = d_model
        self.scale = scale
        self.embeddings_initializer = keras.initializers.get(
            embeddings_initializer
            or keras.initializers.RandomNormal(stddev=d_model**-0.5)
        )

    def build(self, inputs_shape=None):
        self.embeddings = self.add_weight(
            name="embeddings",
            shape=(self.vocabulary_size, self.d_model),
            initializer=self.embeddings_initializer,
        )
        self.built = True

    def call(self, inputs, reverse=False):
        if reverse:
            # (batch, seq, d_model) @ (d_model, vocab) --> (batch, seq, vocab)
            kernel = ops.transpose(ops.cast(self.embeddings, self.compute_dtype))
            return position_wise_matmul(inputs, kernel)
        # (batch, seq) --> (batch, seq, d_model)
        embedded = ops.take(self.embeddings, ops.cast(inputs, "int32"), axis=0)
        embedded = ops.cast(embedded, self.compute_dtype)
        if not self.scale:
            return embedded
        return embedded * ops.cast(math.sqrt(self.d_model), self.compute_dtype)

    def compute_output_spec(self, inputs, reverse=False):
        if reverse:
            shape = tuple(inputs.shape[:-1]) + (self.vocabulary_size,)
        else:
            shape = tuple(inputs.shape) + (self.d_model,)
        return keras.KerasTensor(shape, dtype=self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "d_model": self.d_model,
                "scale": self.scale,
                "embeddings_initializer": keras.initializers.serialize(
                    self.embeddings_initializer
                ),
            }
        )
        return config
