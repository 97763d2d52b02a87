"""The number of real target tokens trained or evaluated on."""

import keras
from keras import ops

from keras_transformer.losses.label_smoothed_cross_entropy import token_weights


@keras.saving.register_keras_serializable(package="keras_transformer")
class TokenCount(keras.metrics.Metric):
    """Counts the real (non-pad) target tokens since the last reset (Keras
    resets metrics every epoch): the tokens an epoch trained on, and with
    the elapsed time a run's tokens per second.

    Args:
        pad_id: int, the label that is not a token. Default 0.
        name: str.

    Call arguments (`update_state`):
        y_true: int `(batch, seq)` labels.
        y_pred: ignored.
        sample_weight: optional `(batch,)` or `(batch, seq)` weights; a
            token of weight 0 is not counted.

    Example:
    >>> metric = TokenCount()
    >>> metric.update_state([[5, 6, 0], [7, 0, 0]], None)
    >>> float(metric.result())
    3.0
    """

    def __init__(self, pad_id=0, name="tokens", **kwargs):
        super().__init__(name=name, **kwargs)
        self.pad_id = pad_id
        self.count = self.add_variable((), initializer="zeros", name="count")

    def update_state(self, y_true, y_pred, sample_weight=None):
        labels = ops.cast(y_true, "int32")  # (batch, seq)
        weights = token_weights(labels, self.pad_id, sample_weight)
        self.count.assign_add(ops.sum(ops.cast(ops.not_equal(weights, 0), "float32")))

    def result(self):
        # A copy: Keras reads an epoch's logs after validation has reset and
        # refilled the count, and on PyTorch and TensorFlow the variable's
        # own tensor would by then hold the validation's tokens.
        return ops.copy(self.count)

    def get_config(self):
        return {"name": self.name, "dtype": self.dtype, "pad_id": self.pad_id}
