"""What the package's functional models share: their layers are created
before the graph, and their config is their constructor's arguments."""

import keras


class ModelBase(keras.Model):
    """A functional `keras.Model` whose subclass creates its layers, then
    builds its graph from them and calls `keras.Model.__init__`; its
    `get_config` returns its constructor arguments (`_config`)."""

    def __setattr__(self, name, value):
        # The layers are set before `keras.Model.__init__`, as the functional
        # graph is built from them; on PyTorch that runs before
        # `torch.nn.Module.__init__`, which refuses modules then. The
        # functional graph tracks every layer, so plain attributes suffice.
        if keras.backend.backend() == "torch" and "_modules" not in self.__dict__:
            return object.__setattr__(self, name, value)
        return super().__setattr__(name, value)

    def _config(self):
        """The constructor arguments besides those of `keras.Model`."""
        raise NotImplementedError

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "dtype": keras.dtype_policies.serialize(self.dtype_policy),
            **self._config(),
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
        if "activation" in config:
            config["activation"] = keras.activations.get(config["activation"])
        return cls(**config)
