"""The training program: the paper's recipe in model.fit, with checkpoints
that survive interruption, checkpoint averaging and BLEU evaluation."""

from keras_transformer.training.checkpoints import (
    AtomicCheckpoint,
    average_checkpoints,
    list_checkpoints,
)
from keras_transformer.training.train import TrainConfig, train
