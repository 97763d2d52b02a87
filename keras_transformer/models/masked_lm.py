"""Masked language modelling (BERT's pretraining) on a `BidirectionalEncoder`."""

import keras

from keras_transformer.layers.masked_lm_head import MaskedLMHead
from keras_transformer.models.bidirectional_encoder import BidirectionalEncoder
from keras_transformer.models.model_base import ModelBase


@keras.saving.register_keras_serializable(package="keras_transformer")
class MaskedLM(ModelBase):
    """An encoder that predicts the tokens hidden at given positions.

    BERT's pretraining objective: some input tokens are replaced (by a mask
    token, a random token, or left as they are) and the model predicts the
    originals at those positions only. `keras_transformer.data.masking`
    makes such batches; the loss is the cross-entropy at the masked
    positions, weighted by `mask_weights` so padded slots count for
    nothing. The encoder's last block computes only the masked positions
    (`BidirectionalEncoder.encode`), the only ones the head reads.

    Args:
        encoder: a `BidirectionalEncoder`, shared (not copied): after
            pretraining, hand `masked_lm.encoder` to a `SequenceClassifier`.
        **kwargs: passed to `keras.Model`.

    Inputs:
        `{"token_ids": int (batch, seq), "segment_ids": int (batch, seq),
          "mask_positions": int (batch, num_masked)}`.

    Returns:
        float32 logits `(batch, num_masked, vocabulary_size)`.

    Example:
    >>> mlm = MaskedLM.from_preset("bert_tiny")
    >>> ids = keras.ops.ones((2, 7), "int32")
    >>> mlm({"token_ids": ids, "segment_ids": 0 * ids,
    ...      "mask_positions": keras.ops.ones((2, 3), "int32")}).shape
    (2, 3, 8000)
    """

    def __init__(self, encoder, **kwargs):
        self.encoder = encoder
        self.head = MaskedLMHead(
            encoder.token_embedding, activation=encoder.activation,
            layer_norm_epsilon=encoder.layer_norm_epsilon, name="masked_lm_head",
            dtype=encoder.dtype_policy,
        )
        inputs = {
            "token_ids": keras.Input(shape=(None,), dtype="int32", name="token_ids"),
            "segment_ids": keras.Input(shape=(None,), dtype="int32", name="segment_ids"),
            "mask_positions": keras.Input(
                shape=(None,), dtype="int32", name="mask_positions"
            ),
        }
        # (batch, num_masked, d_model): the last block computes only these.
        masked = encoder.encode(
            inputs["token_ids"], inputs["segment_ids"],
            output_positions=inputs["mask_positions"],
        )
        logits = self.head(masked)
        kwargs.setdefault("dtype", encoder.dtype_policy)
        super().__init__(inputs=inputs, outputs=logits, **kwargs)

    @classmethod
    def from_preset(cls, name, **overrides):
        """A `MaskedLM` on `BidirectionalEncoder.from_preset(name, **overrides)`."""
        return cls(BidirectionalEncoder.from_preset(name, **overrides))
