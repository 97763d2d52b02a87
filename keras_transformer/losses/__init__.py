from keras_transformer.losses.label_smoothed_cross_entropy import (
    LabelSmoothedCrossEntropy,
)
