"""What the package's optimizers add to Keras's moving average on JAX."""

import keras


class OwnAverageBuffers:
    """A mixin for a Keras optimizer: after `fit` writes the moving average
    into the weights, each weight gets a buffer of its own on JAX.

    Why: there the assignment makes a weight and its average one buffer,
    and the next `fit`, which donates both to its compiled step, fails
    ("donate the same buffer twice").
    """

    def _overwrite_model_variables_with_average_value(self, trainable_variables):
        super()._overwrite_model_variables_with_average_value(trainable_variables)
        if keras.backend.backend() == "jax":
            for variable in trainable_variables:
                variable.assign(keras.ops.copy(variable.value))
