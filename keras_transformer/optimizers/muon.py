"""Keras's Muon, set up for the package's models."""

import keras

from keras_transformer.optimizers.own_average_buffers import OwnAverageBuffers

# The layers that map hidden states to outputs (an untied `Transformer`'s
# projection, a classifier's logits) are not hidden layers, which is what
# Muon is for: they take the AdamW step, as the embedding tables do.
OUTPUT_LAYERS = (r"(^|/)output_projection/", r"(^|/)logits/")


@keras.saving.register_keras_serializable(package="keras_transformer")
class Muon(OwnAverageBuffers, keras.optimizers.Muon):
    """`keras.optimizers.Muon`: the momentum of each hidden layer's matrix
    orthogonalised by Newton-Schulz iterations, and AdamW for everything
    else (embeddings, biases, LayerNorm, output layers). Keras's update is
    scaled by `0.2 sqrt(max(rows, cols))` to AdamW's size, so both parts
    take the same learning rate.

    Its arguments are Keras's; `exclude_layers` defaults to the package's
    output layers, and on JAX a model can be fitted again after `fit` wrote
    the moving average into its weights (`OwnAverageBuffers`).
    """

    def __init__(self, *args, exclude_layers=OUTPUT_LAYERS, **kwargs):
        super().__init__(*args, exclude_layers=list(exclude_layers), **kwargs)
