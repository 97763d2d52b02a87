from keras_transformer.models.presets import PRESETS
from keras_transformer.models.transformer import Transformer
