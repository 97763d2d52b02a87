from keras_transformer.optimizers.adam import Adam
from keras_transformer.optimizers.muon import Muon
from keras_transformer.optimizers.transformer_adam import transformer_adam, transformer_muon
