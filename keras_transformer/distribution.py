"""Training on more than one device, through the engines Keras already has.

    --distribution none      one device (the default)
    --distribution data      data parallelism: JAX `keras.distribution.
                             DataParallel`; TensorFlow `tf.distribute.
                             MirroredStrategy` (`MultiWorkerMirroredStrategy`
                             when `TF_CONFIG` names a cluster)
    --distribution model:K   JAX only: `keras.distribution.ModelParallel` on
                             a (devices / K, K) mesh of axes ("batch",
                             "model"): the weights are sharded K ways over
                             "model" as `transformer_layout_map` says, and
                             the batch over the devices / K model replicas.

The batch rule: `tokens_per_batch` is the global token budget of one
optimizer step, split evenly over the data-parallel replicas, so the
warmup schedule (which counts steps) means the same on any device count.
Each bucket's batch has a multiple of the replica count rows
(`data_parallel_size`), so every replica gets the same number of rows.
"""

import contextlib
import os

import keras


def parse_distribution(spec):
    """`"none"`, `"data"` or `"model:K"` -> `(kind, model_parallel_size)`."""
    text = (spec or "none").strip().lower()
    if text in ("none", "data"):
        return text, 1
    kind, _, size = text.partition(":")
    if kind == "model" and size.isdigit() and int(size) >= 1:
        return "model", int(size)
    raise ValueError(
        "`distribution` must be 'none', 'data' or 'model:K' with K >= 1 the "
        f"number of devices each weight is sharded over. Received: {spec!r}"
    )


def sum_over_replicas(x):
    """`x` summed over the replicas of a `tf.distribute` strategy, inside
    its replica context; `x` itself anywhere else (JAX's data-parallel step
    is one global computation, which needs no sum)."""
    if keras.backend.backend() != "tensorflow":
        return x
    import tensorflow as tf

    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return x
    return context.all_reduce("sum", x)


def transformer_layout_map(device_mesh, model_axis="model"):
    """Megatron-style sharding of the `Transformer`'s weights over the
    `model_axis` of `device_mesh`.

    Q, K, V and the first feed-forward layer are split by output columns
    (whole heads, whole hidden units); the attention output and second
    feed-forward layer by input rows, so each block needs one reduction
    per sublayer. The shared embedding is split along d_model. Layer norms
    and output biases are replicated.
    """
    layout_map = keras.distribution.LayoutMap(device_mesh)
    layout_map[r"token_embedding/embeddings"] = (None, model_axis)  # (V, d_model)
    layout_map[r".*attention/(query|key|value)/kernel"] = (None, model_axis)  # (d_model, h*d_k)
    layout_map[r".*attention/(query|key|value)/bias"] = (model_axis,)
    layout_map[r".*attention/attention_output/kernel"] = (model_axis, None)  # (h*d_v, d_model)
    layout_map[r".*feed_forward/inner/kernel"] = (None, model_axis)  # (d_model, d_ff)
    layout_map[r".*feed_forward/inner/bias"] = (model_axis,)
    layout_map[r".*feed_forward/output/kernel"] = (model_axis, None)  # (d_ff, d_model)
    return layout_map


class Parallelism:
    """The engine for one `--distribution` spec on the current backend.

    Args:
        spec: "none", "data" or "model:K" (see the module docstring).

    Attributes:
        kind: "none", "data" or "model".
        model_parallel_size: int, the devices each weight is sharded over.
        data_parallel_size: int, the replicas a batch's rows are split over.

    Raises:
        ValueError: naming the spec and the backend, when the backend has
            no engine for it or the device count does not divide.

    Example:
    >>> parallelism = Parallelism("data")
    >>> with parallelism.scope():
    ...     model = Transformer.from_preset("tiny"); model.compile(...)
    ...     model.fit(make_dataset(..., batch_multiple=parallelism.data_parallel_size))
    """

    def __init__(self, spec="none"):
        self.kind, self.model_parallel_size = parse_distribution(spec)
        self._engine = None  # a keras Distribution or a tf.distribute.Strategy
        backend = keras.backend.backend()
        if self.kind == "none":
            self.data_parallel_size = 1
        elif backend == "jax":
            devices = keras.distribution.list_devices()
            if len(devices) % self.model_parallel_size:
                raise ValueError(
                    f"distribution {spec!r} needs a device count divisible by "
                    f"{self.model_parallel_size}; there are {len(devices)} devices."
                )
            self.data_parallel_size = len(devices) // self.model_parallel_size
            if self.kind == "data":
                self._engine = keras.distribution.DataParallel(devices=devices)
            else:
                mesh = keras.distribution.DeviceMesh(
                    (self.data_parallel_size, self.model_parallel_size),
                    ("batch", "model"), devices)
                self._engine = keras.distribution.ModelParallel(
                    layout_map=transformer_layout_map(mesh), batch_dim_name="batch")
        elif backend == "tensorflow" and self.kind == "data":
            import tensorflow as tf

            self._engine = (tf.distribute.MultiWorkerMirroredStrategy()
                            if "TF_CONFIG" in os.environ
                            else tf.distribute.MirroredStrategy())
            self.data_parallel_size = self._engine.num_replicas_in_sync
        else:
            raise ValueError(
                f"distribution {spec!r} is not supported on the {backend} backend: "
                "'data' needs JAX or TensorFlow, 'model:K' needs JAX (Keras' "
                "distribution API). PyTorch trains on one device."
            )

    def check_model(self, num_heads, d_ff, d_model):
        """Raises if the model's dimensions do not split over the model axis."""
        size = self.model_parallel_size
        for name, value in (("num_heads", num_heads), ("d_ff", d_ff), ("d_model", d_model)):
            if value % size:
                raise ValueError(
                    f"distribution 'model:{size}' shards {name}={value} {size} "
                    f"ways; {name} must be a multiple of {size}."
                )

    def scope(self):
        """The context to build, compile, load and fit models in."""
        return self._engine.scope() if self._engine is not None else contextlib.nullcontext()
