"""Keras's Adam, updated by one fused kernel on PyTorch."""

import keras

from keras_transformer.optimizers.foreach_on_torch import (ForeachOnTorch, fused_adam_,
                                                           on_torch_eager)
from keras_transformer.optimizers.own_average_buffers import OwnAverageBuffers


@keras.saving.register_keras_serializable(package="keras_transformer")
class Adam(OwnAverageBuffers, ForeachOnTorch, keras.optimizers.Adam):
    """`keras.optimizers.Adam`: the same arguments, state, checkpoints and
    results, but on PyTorch the update is `torch._fused_adam_`, one pass
    over every weight, and the moving average and gradient accumulation
    are one `torch._foreach_*` call each (`ForeachOnTorch`).

    Why: Keras's PyTorch Adam runs about ten list-wide elementwise ops per
    update, each a pass over every weight and its moments; at the `small`
    preset's size the fused kernel takes a quarter of their time, 3-4% of
    a CPU training step (docs/RESULTS.md). TensorFlow and JAX compile
    Keras's own update into the step; there this class is
    `keras.optimizers.Adam`.

    With `use_ema=True` a model can be fitted again on JAX, where a second
    `fit` with Keras's own Adam fails once the first has written the
    moving average into the weights.
    """

    def _backend_update_step(self, grads, variables, learning_rate):
        if not on_torch_eager():
            return super()._backend_update_step(grads, variables, learning_rate)
        indices = [self._get_variable_index(variable) for variable in variables]
        fused_adam_([variable.value for variable in variables], list(grads),
                    [self._momentums[i].value for i in indices],
                    [self._velocities[i].value for i in indices],
                    [self._velocity_hats[i].value for i in indices] if self.amsgrad else None,
                    int(self.iterations) + 1, float(learning_rate),
                    self.beta_1, self.beta_2, self.epsilon, self.amsgrad)
