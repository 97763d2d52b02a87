"""What the package's optimizers run in PyTorch's list-wide kernels."""

import math

import keras


def on_torch_eager():
    """Whether an update may run in PyTorch's kernels: on the PyTorch
    backend, outside `torch.compile` (which traces Keras's own ops)."""
    if keras.backend.backend() != "torch":
        return False
    import torch

    return not torch.compiler.is_compiling()


def fused_adam_(params, grads, momentums, velocities, velocity_hats, step, learning_rate,
                beta_1, beta_2, epsilon, amsgrad=False):
    """Keras's Adam update (step `step`, counted from 1) on PyTorch tensors,
    in place, by `torch._fused_adam_`: one pass over every weight.

    PyTorch adds epsilon to the bias-corrected root of the second moment,
    Keras to the uncorrected one, so the kernel is given
    `epsilon / sqrt(1 - beta_2^t)`: the same update.
    """
    import torch

    eps = epsilon / math.sqrt(1 - beta_2**step)
    groups = {}  # the kernel takes one device and dtype per call
    for i, param in enumerate(params):
        group = groups.setdefault((param.device, param.dtype), ([], [], [], [], []))
        for members, tensors in zip(group, (params, grads, momentums, velocities)):
            members.append(tensors[i])
        if amsgrad:
            group[4].append(velocity_hats[i])
    with torch.no_grad():
        for (device, _), (p, g, m, v, v_hat) in groups.items():
            t = torch.tensor(float(step), device=device)
            torch._fused_adam_(p, g, m, v, v_hat, [t] * len(p), lr=learning_rate,
                               beta1=beta_1, beta2=beta_2,
                               weight_decay=0.0,  # Keras decays the weights before the update
                               eps=eps, amsgrad=amsgrad, maximize=False)


class ForeachOnTorch:
    """A mixin for a Keras optimizer: on PyTorch, the moving average of the
    weights and gradient accumulation are one `torch._foreach_*` call each.

    Why: Keras runs each as a few ops per weight, dispatched one at a time
    (docs/RESULTS.md: "PyTorch: Adam's update fused").
    """

    def _update_model_variables_moving_average(self, trainable_variables):
        if not (self.use_ema and on_torch_eager()):
            return super()._update_model_variables_moving_average(trainable_variables)
        import torch

        averages, weights = [], []
        for variable, average in zip(trainable_variables,
                                     self._model_variables_moving_average):
            if average is not None:
                averages.append(average.value)
                weights.append(variable.value)
        # Keras's first average is the weights themselves (momentum 0).
        momentum = self.ema_momentum if int(self.iterations) else 0.0
        with torch.no_grad():
            torch._foreach_lerp_(averages, weights, 1.0 - momentum)

    def _backend_increment_gradient_accumulators(self, grads, acc_grads):
        if not on_torch_eager():
            return super()._backend_increment_gradient_accumulators(grads, acc_grads)
        import torch

        with torch.no_grad():
            torch._foreach_add_([a.value for a in acc_grads], list(grads))

    def _backend_reset_gradient_accumulators(self):
        if not on_torch_eager():
            return super()._backend_reset_gradient_accumulators()
        import torch

        with torch.no_grad():
            torch._foreach_zero_([a.value for a in self._accumulated_gradients
                                  if a is not None])
