"""Token accuracy that ignores padding."""

import keras
from keras import ops

from keras_transformer.losses.label_smoothed_cross_entropy import token_weights


@keras.saving.register_keras_serializable(package="keras_transformer")
class MaskedAccuracy(keras.metrics.Metric):
    """The fraction of real (non-pad) target tokens predicted exactly.

    Args:
        pad_id: int, the label to ignore. Default 0.
        name: str.

    Call arguments (`update_state`):
        y_true: int `(batch, seq)` labels.
        y_pred: float `(batch, seq, V)` logits or probabilities.
        sample_weight: optional `(batch,)` or `(batch, seq)` weights.

    Example:
    >>> metric = MaskedAccuracy()
    >>> metric.update_state([[2, 1, 0]], keras.ops.one_hot([[2, 3, 3]], 4))
    >>> float(metric.result())  # 1 of 2 real tokens
    0.5
    """

    def __init__(self, pad_id=0, name="masked_accuracy", **kwargs):
        super().__init__(name=name, **kwargs)
        self.pad_id = pad_id
        self.correct = self.add_variable((), initializer="zeros", name="correct")
        self.count = self.add_variable((), initializer="zeros", name="count")

    def update_state(self, y_true, y_pred, sample_weight=None):
        labels = ops.cast(y_true, "int32")  # (batch, seq)
        predicted = ops.cast(ops.argmax(y_pred, axis=-1), "int32")
        weights = token_weights(labels, self.pad_id, sample_weight)
        hits = ops.cast(ops.equal(labels, predicted), "float32") * weights
        self.correct.assign_add(ops.sum(hits))
        self.count.assign_add(ops.sum(weights))

    def result(self):
        return ops.divide_no_nan(self.correct, self.count)

    def get_config(self):
        return {"name": self.name, "dtype": self.dtype, "pad_id": self.pad_id}
