"""keras_transformer: the Transformer of "Attention Is All You Need" in Keras 3.

Runs unchanged on TensorFlow, JAX and PyTorch (set `KERAS_BACKEND` before
importing keras). Importing this package registers every layer, model,
schedule, loss and metric, so `.keras` files load with no `custom_objects`.
"""

from keras_transformer import layers, losses, metrics, optimizers, schedules
from keras_transformer.losses import LabelSmoothedCrossEntropy
from keras_transformer.metrics import MaskedAccuracy, TokenCount
from keras_transformer.models import (
    PRESETS,
    BidirectionalEncoder,
    CausalLM,
    MaskedLM,
    SequenceClassifier,
    Transformer,
)
from keras_transformer.optimizers import transformer_adam, transformer_muon
from keras_transformer.schedules import WarmupSchedule
from keras_transformer.translator import Translator

__version__ = "0.1.0"
