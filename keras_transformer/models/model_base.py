"""What the package's functional models share: their layers are created
before the graph, their config is their constructor's arguments, and their
presets are rows of a table."""

import inspect

import keras

from keras_transformer.checks import check_rate
from keras_transformer.layers.dropout import Dropout
from keras_transformer.layers.multi_head_attention import MultiHeadAttention
from keras_transformer.models.presets import get_preset


class ModelBase(keras.Model):
    """A functional `keras.Model` whose subclass creates its layers, then
    builds its graph from them and calls `keras.Model.__init__`.

    Each constructor argument is kept as the attribute of the same name,
    so `get_config` reads them back by the constructor's signature. A
    subclass with presets names their table in `presets`.
    """

    presets = None  # {name: {"config": constructor arguments, ...}}

    def __setattr__(self, name, value):
        # The layers are set before `keras.Model.__init__`, as the functional
        # graph is built from them; on PyTorch that runs before
        # `torch.nn.Module.__init__`, which refuses modules then. The
        # functional graph tracks every layer, so plain attributes suffice.
        if keras.backend.backend() == "torch" and "_modules" not in self.__dict__:
            return object.__setattr__(self, name, value)
        return super().__setattr__(name, value)

    @property
    def layers(self):
        """The graph's layers, with a shared `encoder` (a model whose stages
        this graph calls directly) listed once, as one layer, where its first
        layer is: its weights then keep the paths `.keras` files give them,
        the same as when this graph called the encoder whole."""
        layers = super().layers
        encoder = getattr(self, "encoder", None)
        if not isinstance(encoder, keras.Model):
            return layers
        inner = {id(layer) for layer in encoder.layers}
        listed, seen = [], False
        for layer in layers:
            if id(layer) not in inner:
                listed.append(layer)
            elif not seen:
                listed.append(encoder)
                seen = True
        return listed

    def make_train_function(self, force=False):
        """On TensorFlow, creates the optimizer's variables before the
        training step is traced, as loading a `.keras` file does.

        Without a distribution strategy Keras creates them inside the first
        step's `tf.function`, which must then be traced twice, about
        doubling the first step's time (docs/RESULTS.md). JAX and PyTorch
        create them before their first step anyway.
        """
        if (keras.backend.backend() == "tensorflow" and self.optimizer is not None
                and not self.optimizer.built):
            self.optimizer.build(self.trainable_variables)
        return super().make_train_function(force)

    def set_dropout_rate(self, rate, variable_rate=None):
        """Sets `P_drop` (section 5.4): the rate of every dropout but the
        attention weights', and the `dropout_rate` that the model and its
        blocks save. `fit` uses it from its next step once the training
        step is traced again (`make_train_function(force=True)`), or at
        once where those dropouts have `variable_rate` (`Dropout`).

        Args:
            rate: float in `[0, 1)`.
            variable_rate: bool, what to set those dropouts' `variable_rate`
                to (a step traced before must be traced again), or None to
                keep it.
        """
        check_rate("dropout_rate", rate)
        layers = list(self._flatten_layers())  # this model and every layer in it
        attention = {id(layer.dropout_layer) for layer in layers
                     if isinstance(layer, MultiHeadAttention) and layer.built}
        for layer in layers:
            if isinstance(layer, Dropout) and id(layer) not in attention:
                layer.rate = rate
                if variable_rate is not None:
                    layer.variable_rate = variable_rate
            elif hasattr(layer, "dropout_rate"):
                layer.dropout_rate = rate

    @classmethod
    def from_preset(cls, name, **overrides):
        """Builds the preset `name` of `cls.presets`, with `overrides` of
        its constructor arguments (e.g. `vocabulary_size=8000`)."""
        return cls(**{**get_preset(name, cls.presets)["config"], **overrides})

    def get_config(self):
        config = {
            "name": self.name,
            "trainable": self.trainable,
            "dtype": keras.dtype_policies.serialize(self.dtype_policy),
        }
        for name, parameter in inspect.signature(type(self).__init__).parameters.items():
            if name in config or name == "self" or parameter.kind == parameter.VAR_KEYWORD:
                continue
            value = getattr(self, name)
            if isinstance(value, keras.layers.Layer):  # a shared encoder
                value = keras.saving.serialize_keras_object(value)
            elif name == "activation":
                value = keras.activations.serialize(keras.activations.get(value))
            config[name] = value
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
        if "activation" in config:
            config["activation"] = keras.activations.get(config["activation"])
        if "encoder" in config:
            config["encoder"] = keras.saving.deserialize_keras_object(config["encoder"])
        return cls(**config)
