"""Keras's Muon, set up for the package's models."""

import math

import keras

from keras_transformer.optimizers.foreach_on_torch import (ForeachOnTorch, fused_adam_,
                                                           on_torch_eager)
from keras_transformer.optimizers.own_average_buffers import OwnAverageBuffers

# The layers that map hidden states to outputs (an untied `Transformer`'s
# projection, a classifier's logits) are not hidden layers, which is what
# Muon is for: they take the AdamW step, as the embedding tables do.
OUTPUT_LAYERS = (r"(^|/)output_projection/", r"(^|/)logits/")


@keras.saving.register_keras_serializable(package="keras_transformer")
class Muon(OwnAverageBuffers, ForeachOnTorch, keras.optimizers.Muon):
    """`keras.optimizers.Muon`: the momentum of each hidden layer's matrix
    orthogonalised by Newton-Schulz iterations, and AdamW for everything
    else (embeddings, biases, LayerNorm, output layers). Keras's update is
    scaled by `0.2 sqrt(max(rows, cols))` to AdamW's size, so both parts
    take the same learning rate.

    Its arguments are Keras's; `exclude_layers` defaults to the package's
    output layers, and on JAX a model can be fitted again after `fit` wrote
    the moving average into its weights (`OwnAverageBuffers`).

    On PyTorch the update is Keras's in list-wide kernels: the AdamW part
    is `torch._fused_adam_`, the momentum two `torch._foreach_*` calls, and
    the Newton-Schulz iterations run on each shape's matrices stacked into
    one batch: Keras's own update dispatches about 40 ops per matrix, one
    at a time (docs/RESULTS.md: "Muon's update on PyTorch").
    """

    def __init__(self, *args, exclude_layers=OUTPUT_LAYERS, **kwargs):
        super().__init__(*args, exclude_layers=list(exclude_layers), **kwargs)

    def _apply_weight_decay(self, variables):
        """Keras's decoupled decay, `weight_decay` for the Muon part and
        `adam_weight_decay` for the rest, with the learning rate read once
        a step: Keras's reads the schedule again for every weight (about
        ten ops each), and on PyTorch dispatches them one by one."""
        groups = {}  # decay -> the weights it applies to
        for variable in variables:
            # `build` gave a velocity to the AdamW part alone; Keras asks
            # `_should_use_adamw`, a regex search per weight, every step.
            adamw = self.adam_velocities[self._get_variable_index(variable)] is not None
            decay = self.adam_weight_decay if adamw else self.weight_decay
            if decay is not None and self._use_weight_decay(variable):
                groups.setdefault(decay, []).append(variable)
        if not groups:
            return
        learning_rate = self.learning_rate
        if on_torch_eager():
            import torch

            with torch.no_grad():
                for decay, group in groups.items():
                    torch._foreach_mul_([v.value for v in group],
                                        1 - decay * float(learning_rate))
            return
        for decay, group in groups.items():
            for variable in group:
                lr = keras.ops.cast(learning_rate, variable.dtype)
                wd = keras.ops.cast(decay, variable.dtype)
                variable.assign(variable - variable * wd * lr)

    def _backend_update_step(self, grads, variables, learning_rate):
        if not on_torch_eager():
            return super()._backend_update_step(grads, variables, learning_rate)
        adamw, muon = ([], [], [], []), ([], [], [])
        for variable, grad in zip(variables, grads):
            i = self._get_variable_index(variable)
            velocity = self.adam_velocities[i]
            part = (variable.value, grad, self.momentums[i].value)
            if velocity is None:
                for members, tensor in zip(muon, part):
                    members.append(tensor)
            else:
                for members, tensor in zip(adamw, part + (velocity.value,)):
                    members.append(tensor)
        learning_rate = float(learning_rate)
        if adamw[0]:
            fused_adam_(*adamw, None, int(self.iterations) + 1,
                        learning_rate * self.adam_lr_ratio, self.adam_beta_1,
                        self.adam_beta_2, self.epsilon)
        if muon[0]:
            self._muon_update_on_torch(*muon, learning_rate)

    def _muon_update_on_torch(self, params, grads, momentums, learning_rate):
        """Keras's `_muon_update_step` for every hidden matrix at once."""
        import torch

        with torch.no_grad():
            torch._foreach_mul_(momentums, self.momentum)
            torch._foreach_add_(momentums, grads)  # m = momentum m + g
            directions = (torch._foreach_add(grads, momentums, alpha=self.momentum)
                          if self.nesterov else momentums)
            groups = {}  # the matrices of one wide shape: (params, directions, talls)
            for param, direction in zip(params, directions):
                tall = param.shape[0] > param.shape[1]
                wide = direction.mT if tall else direction
                group = groups.setdefault((wide.shape, param.dtype, param.device),
                                          ([], [], []))
                for members, member in zip(group, (param, wide, tall)):
                    members.append(member)
            for ((_, cols), _, _), (members, wide, talls) in groups.items():
                # (n, rows, cols), rows <= cols
                orthogonal = self.zeropower_via_newtonschulz5(torch.stack(wide),
                                                              self.ns_steps)
                updates = [u.mT if tall else u
                           for tall, u in zip(talls, orthogonal.unbind(0))]
                scale = 1.0 if self.rms_rate is None else math.sqrt(cols) * self.rms_rate
                torch._foreach_add_(members, updates, alpha=-learning_rate * scale)
