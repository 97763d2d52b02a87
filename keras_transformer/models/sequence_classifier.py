"""Classifying sentences and sentence pairs with a `BidirectionalEncoder`."""

import keras
from keras import ops

from keras_transformer.checks import check_positive_int, check_rate
from keras_transformer.layers.dropout import Dropout
from keras_transformer.layers.position_wise_dense import PositionWiseDense
from keras_transformer.models.bidirectional_encoder import BidirectionalEncoder
from keras_transformer.models.model_base import ModelBase


@keras.saving.register_keras_serializable(package="keras_transformer")
class SequenceClassifier(ModelBase):
    """A classifier on an encoder's pooled first token, as BERT fine-tunes.

    A single sentence is `[bos] tokens [eos]` with segment ids 0; a pair is
    `[bos] A [eos] B [eos]` with segment ids 0 over A and 1 over B
    (`keras_transformer.data.classification.pack_pairs` builds both). The pooled
    output, with dropout, feeds one dense layer of `num_classes` logits.

    Args:
        encoder: a `BidirectionalEncoder`, pretrained (`MaskedLM.encoder`)
            or new.
        num_classes: int.
        dropout_rate: float in `[0, 1)`, before the output layer.
            Default: the encoder's.
        **kwargs: passed to `keras.Model`.

    Inputs:
        `{"token_ids": int (batch, seq), "segment_ids": int (batch, seq)}`.

    Returns:
        float32 logits `(batch, num_classes)`.
    """

    def __init__(self, encoder, num_classes, dropout_rate=None, **kwargs):
        check_positive_int("num_classes", num_classes)
        dropout_rate = encoder.dropout_rate if dropout_rate is None else dropout_rate
        check_rate("dropout_rate", dropout_rate)
        self.encoder = encoder
        self.dropout = Dropout(dropout_rate, name="dropout", dtype=encoder.dtype_policy)
        self.output_dense = PositionWiseDense(
            num_classes, name="logits", dtype=encoder.dtype_policy
        )
        self.num_classes = num_classes
        self.dropout_rate = dropout_rate
        inputs = {
            "token_ids": keras.Input(shape=(None,), dtype="int32", name="token_ids"),
            "segment_ids": keras.Input(shape=(None,), dtype="int32", name="segment_ids"),
        }
        # (batch, 1, d_model): the last block computes the first token only.
        first = encoder.encode(
            inputs["token_ids"], inputs["segment_ids"],
            output_positions=ops.zeros_like(inputs["token_ids"][:, :1]),
        )
        pooled = encoder.pool(first)  # (batch, d_model)
        logits = ops.cast(self.output_dense(self.dropout(pooled)), "float32")
        kwargs.setdefault("dtype", encoder.dtype_policy)
        super().__init__(inputs=inputs, outputs=logits, **kwargs)

    @classmethod
    def from_preset(cls, name, num_classes, **overrides):
        """A new classifier on `BidirectionalEncoder.from_preset(name)`."""
        return cls(BidirectionalEncoder.from_preset(name, **overrides), num_classes)
