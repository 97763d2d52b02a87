"""Label-smoothed cross-entropy over target tokens (paper section 5.4)."""

import keras
from keras import ops

from keras_transformer.checks import check_rate
from keras_transformer.distribution import sum_over_replicas


def token_weights(labels, pad_id, sample_weight=None):
    """float32 `(batch, seq)`: 1 at real tokens, 0 at `pad_id`, times
    `sample_weight` (`(batch,)` or `(batch, seq)`) if given."""
    weights = ops.cast(ops.not_equal(labels, pad_id), "float32")
    if sample_weight is None:
        return weights
    sample_weight = ops.cast(sample_weight, "float32")
    if len(sample_weight.shape) == 1:
        sample_weight = sample_weight[:, None]
    return weights * sample_weight


def _gradient_in_place(softmax, labels, upstream, epsilon):
    """PyTorch: `(softmax - smoothed one-hot) * upstream`, written into the
    `(batch, seq, V)` softmax, which nothing else holds: two passes over
    it, where the backend-agnostic form (a comparison with every class,
    a select, a subtraction and a product) makes four passes and two new
    tensors: about 30 ms of a 0.8 s training step at the `small` preset's
    size (docs/RESULTS.md)."""
    import torch

    vocabulary_size = softmax.shape[-1]
    with torch.no_grad():
        softmax.sub_(epsilon / vocabulary_size)
        rows = softmax.view(-1, vocabulary_size)  # (batch * seq, V)
        rows[torch.arange(rows.shape[0]), labels.reshape(-1).long()] -= 1.0 - epsilon
        return softmax.mul_(upstream[..., None])


@keras.saving.register_keras_serializable(package="keras_transformer")
class LabelSmoothedCrossEntropy(keras.losses.Loss):
    """Cross-entropy against `(1 - eps) * one_hot(y) + eps / V`, sparsely.

    Section 5.4 trains with label smoothing `eps_ls = 0.1`. With `z` the
    logits over `V` classes and `log p[v] = z[v] - logsumexp(z)`, the
    smoothed loss of one token is

        (1 - eps) * (-log p[y]) + eps * mean_v(-log p[v])
          = logsumexp(z) - (1 - eps) * z[y] - eps * mean_v(z[v])

    computed in the second form: three reductions over the logits, with no
    one-hot target and no `(batch, seq, V)` log-softmax. Its gradient is
    written out,

        d loss / d z[v] = softmax(z)[v] - (1 - eps) * [v == y] - eps / V,

    one elementwise pass from the saved `logsumexp(z)`, instead of the
    autodiff of each reduction (several passes over `(batch, seq, V)`),
    and `z[y]` is a gather whose gradient is never taken (both faster on
    every backend; docs/RESULTS.md). Positions whose label is `pad_id`
    are ignored, and the result is the mean over real (non-pad) tokens,
    weighted by `sample_weight` if given.

    Where the softmax comes from depends on the backend. XLA (JAX,
    TensorFlow) fuses `exp(z - logsumexp(z))` into the gradient's single
    pass, so the backward pass recomputes it from `z`. PyTorch runs one op
    at a time, and every new `(batch, seq, V)` float32 tensor is fresh
    memory that page-faults on first touch (its CPU allocator hands large
    blocks back to the system), so there the forward pass keeps the
    softmax, `logsumexp(z) = max(z) - log(max(softmax(z)))`, and the
    gradient is written into it in place (`_gradient_in_place`).

    Args:
        epsilon: float in `[0, 1)`, `eps_ls`. Default 0.1.
        pad_id: int, the label to ignore. Default 0.
        name: str.

    Call arguments:
        y_true: int `(batch, seq)` labels.
        y_pred: float `(batch, seq, V)` logits.
        sample_weight: optional `(batch,)` or `(batch, seq)` weights.

    Returns:
        A scalar: the mean loss per real token.

    Example:
    >>> loss = LabelSmoothedCrossEntropy(epsilon=0.1)
    >>> loss(keras.ops.array([[1, 0]]), keras.ops.zeros((1, 2, 4)))  # log 4
    1.3862944
    """

    def __init__(self, epsilon=0.1, pad_id=0, name="label_smoothed_cross_entropy",
                 **kwargs):
        # `__call__` does its own reduction (a mean over real tokens).
        super().__init__(name=name, **kwargs)
        check_rate("epsilon", epsilon)
        self.epsilon = epsilon
        self.pad_id = pad_id
        # Keep the forward pass's softmax for the gradient (see above).
        self._keep_softmax = keras.backend.backend() == "torch"

    def call(self, y_true, y_pred):
        """Per-token losses `(batch, seq)`, zero at padding."""
        labels = ops.cast(y_true, "int32")  # (batch, seq)
        logits = ops.cast(y_pred, "float32")  # (batch, seq, V)
        epsilon, vocabulary_size = self.epsilon, logits.shape[-1]
        keep_softmax = self._keep_softmax

        @ops.custom_gradient
        def smoothed(z):
            kept = []  # the softmax, for one gradient (which overwrites it)
            if keep_softmax:
                kept.append(ops.softmax(z, axis=-1))  # (batch, seq, V)
                # At the argmax the softmax is exp(max z - logsumexp z) >= 1 / V.
                log_normalizer = ops.max(z, axis=-1) - ops.log(ops.max(kept[0], axis=-1))
            else:
                log_normalizer = ops.logsumexp(z, axis=-1)  # (batch, seq)
            target = ops.take_along_axis(z, labels[..., None], axis=-1)[..., 0]  # z[y]
            losses = (log_normalizer - (1.0 - epsilon) * target
                      - epsilon * ops.mean(z, axis=-1))

            def grad(*args, upstream=None):
                upstream = args[0] if upstream is None else upstream  # (batch, seq)
                softmax = (kept.pop() if kept
                           else ops.exp(z - log_normalizer[..., None]))  # (batch, seq, V)
                if keras.backend.backend() == "torch":
                    return _gradient_in_place(softmax, labels, upstream, epsilon)
                is_label = ops.equal(ops.arange(vocabulary_size, dtype="int32"),
                                     labels[..., None])
                smoothed_target = ops.where(is_label, 1.0 - epsilon + epsilon / vocabulary_size,
                                            epsilon / vocabulary_size)
                return (softmax - smoothed_target) * upstream[..., None]

            return losses, grad

        losses = smoothed(logits)
        real = ops.cast(ops.not_equal(labels, self.pad_id), "float32")
        return losses * real

    def __call__(self, y_true, y_pred, sample_weight=None):
        weights = token_weights(y_true, self.pad_id, sample_weight)  # (batch, seq)
        losses = self.call(y_true, y_pred) * weights
        # Mean over the real tokens of the global batch; 0 for a batch with
        # none. Under tf.distribute each replica divides its own sum by the
        # global count, and the replicas' gradients are summed.
        return ops.divide_no_nan(ops.sum(losses), sum_over_replicas(ops.sum(weights)))

    def get_config(self):
        return {"name": self.name, "epsilon": self.epsilon, "pad_id": self.pad_id}
