"""Keras's Adam, updated by one fused kernel on PyTorch."""

import math

import keras

from keras_transformer.optimizers.own_average_buffers import OwnAverageBuffers


def _fused():
    """Whether the update runs in PyTorch's kernels: on the PyTorch
    backend, outside `torch.compile` (which traces Keras's own ops)."""
    if keras.backend.backend() != "torch":
        return False
    import torch

    return not torch.compiler.is_compiling()


@keras.saving.register_keras_serializable(package="keras_transformer")
class Adam(OwnAverageBuffers, keras.optimizers.Adam):
    """`keras.optimizers.Adam`: the same arguments, state, checkpoints and
    results, but on PyTorch the update is `torch._fused_adam_`, one pass
    over every weight, and the moving average and gradient accumulation
    are one `torch._foreach_*` call each.

    Why: Keras's PyTorch Adam runs about ten list-wide elementwise ops per
    update, each a pass over every weight and its moments; at the `small`
    preset's size the fused kernel takes a quarter of their time, 3-4% of
    a CPU training step (docs/RESULTS.md). TensorFlow and JAX compile
    Keras's own update into the step; there this class is
    `keras.optimizers.Adam`.

    PyTorch adds epsilon to the bias-corrected root of the second moment,
    Keras to the uncorrected one, so the kernel is given
    `epsilon / sqrt(1 - beta_2^t)`: the same update.

    With `use_ema=True` a model can be fitted again on JAX, where a second
    `fit` with Keras's own Adam fails once the first has written the
    moving average into the weights.
    """

    def _backend_update_step(self, grads, variables, learning_rate):
        if not _fused():
            return super()._backend_update_step(grads, variables, learning_rate)
        import torch

        step = int(self.iterations) + 1  # Keras's t (the kernel's bias corrections)
        lr = float(learning_rate)
        eps = self.epsilon / math.sqrt(1 - self.beta_2**step)
        groups = {}  # the kernel takes one device and dtype per call
        for variable, grad in zip(variables, grads):
            i = self._get_variable_index(variable)
            group = groups.setdefault((variable.value.device, variable.value.dtype),
                                      ([], [], [], [], []))
            group[0].append(variable.value)
            group[1].append(grad)
            group[2].append(self._momentums[i].value)
            group[3].append(self._velocities[i].value)
            if self.amsgrad:
                group[4].append(self._velocity_hats[i].value)
        with torch.no_grad():
            for (device, _), (params, group_grads, m, v, v_hat) in groups.items():
                t = torch.tensor(float(step), device=device)
                torch._fused_adam_(
                    params, group_grads, m, v, v_hat, [t] * len(params),
                    lr=lr, beta1=self.beta_1, beta2=self.beta_2,
                    weight_decay=0.0,  # Keras decays the weights before the update
                    eps=eps, amsgrad=self.amsgrad, maximize=False)

    def _update_model_variables_moving_average(self, trainable_variables):
        if not (self.use_ema and _fused()):
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
        if not _fused():
            return super()._backend_increment_gradient_accumulators(grads, acc_grads)
        import torch

        with torch.no_grad():
            torch._foreach_add_([a.value for a in acc_grads], list(grads))

    def _backend_reset_gradient_accumulators(self):
        if not _fused():
            return super()._backend_reset_gradient_accumulators()
        import torch

        with torch.no_grad():
            torch._foreach_zero_([a.value for a in self._accumulated_gradients
                                  if a is not None])
