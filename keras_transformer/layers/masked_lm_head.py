"""BERT's masked-language-model output layer."""

import keras
from keras import ops

from keras_transformer.layers.position_wise_dense import PositionWiseDense, states_at


@keras.saving.register_keras_serializable(package="keras_transformer")
class MaskedLMHead(keras.layers.Layer):
    """Logits of the tokens at the masked positions, as BERT computes them.

    The states at `mask_positions` go through a dense layer with the
    encoder's activation and a LayerNorm, then the transposed token
    embedding (tied, as in the paper's section 3.4) plus a bias of its own.

    Args:
        token_embedding: the encoder's `TokenEmbedding`, whose matrix is
            the output projection.
        activation: the dense layer's activation. Default "gelu".
        layer_norm_epsilon: float. Default 1e-12.
        **kwargs: passed to `keras.layers.Layer`.

    Call arguments:
        sequence: `(batch, seq, d_model)`, the encoder's output; or, without
            `mask_positions`, its states at the masked positions only,
            `(batch, num_masked, d_model)` (as `MaskedLM` computes them).
        mask_positions: int `(batch, num_masked)`, positions to predict,
            or None.

    Returns:
        float32 logits `(batch, num_masked, vocabulary_size)`.
    """

    def __init__(self, token_embedding, activation="gelu", layer_norm_epsilon=1e-12,
                 **kwargs):
        super().__init__(**kwargs)
        self.token_embedding = token_embedding
        self.activation = activation
        self.layer_norm_epsilon = layer_norm_epsilon

    def build(self, sequence_shape, mask_positions_shape=None):
        d_model = sequence_shape[-1]
        self.dense = PositionWiseDense(
            d_model, activation=self.activation, name="dense", dtype=self.dtype_policy
        )
        self.dense.build((None, d_model))
        self.norm = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, name="norm", dtype=self.dtype_policy
        )
        self.norm.build((None, d_model))
        self.output_bias = self.add_weight(
            name="output_bias", shape=(self.token_embedding.vocabulary_size,),
            initializer="zeros",
        )
        self.built = True

    def call(self, sequence, mask_positions=None):
        # --> (batch, num_masked, d_model)
        x = sequence if mask_positions is None else states_at(sequence, mask_positions)
        x = self.norm(self.dense(x))
        logits = self.token_embedding(x, reverse=True)  # (batch, num_masked, vocab)
        return ops.cast(logits, "float32") + ops.cast(self.output_bias, "float32")

    def compute_output_shape(self, sequence_shape, mask_positions_shape=None):
        rows = sequence_shape[:-1] if mask_positions_shape is None else mask_positions_shape
        return tuple(rows) + (self.token_embedding.vocabulary_size,)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "token_embedding": keras.layers.serialize(self.token_embedding),
                "activation": keras.activations.serialize(
                    keras.activations.get(self.activation)
                ),
                "layer_norm_epsilon": self.layer_norm_epsilon,
            }
        )
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["token_embedding"] = keras.layers.deserialize(config["token_embedding"])
        config["activation"] = keras.activations.get(config["activation"])
        return cls(**config)
