"""Compiling a whole decoding loop once per input shape, on every backend.

The search functions are written with `keras.ops` only (`while_loop` for the
loop). This module is the one place that knows the backends, because each
compiles differently:

- JAX: `jax.jit`, with the model's variables passed in as arguments
  (`keras.StatelessScope`) so the weights are not baked into the program.
- TensorFlow: `tf.function(jit_compile=True)`, i.e. XLA.
- PyTorch: no tracing compiler is used (the loop's length is data
  dependent); the loop runs eagerly under `torch.no_grad()`, so no autograd
  graph is recorded.

jax.jit and tf.function cache one program per input shape, so decoding a
second batch of the same shape bucket reuses it. `trace_count` counts how
many times the Python function was traced, for tests.
"""

import keras


class CompiledSearch:
    """`fn(encoder_token_ids) -> outputs`, compiled for the current backend.

    Args:
        model: the `Transformer` whose variables `fn` reads.
        fn: a function of one int tensor `(batch, src_len)` written with
            `keras.ops`.
    """

    def __init__(self, model, fn):
        self.model = model
        self.fn = fn
        self.trace_count = 0
        self._compiled = self._compile()

    def _traced(self, encoder_token_ids):
        self.trace_count += 1  # runs only while tracing on JAX and TensorFlow
        return self.fn(encoder_token_ids)

    def _compile(self):
        backend = keras.backend.backend()
        if backend == "jax":
            import jax

            variables = self.model.variables

            def stateless(values, encoder_token_ids):
                with keras.StatelessScope(state_mapping=list(zip(variables, values))):
                    return self._traced(encoder_token_ids)

            jitted = jax.jit(stateless)
            return lambda ids: jitted([v.value for v in variables], ids)
        if backend == "tensorflow":
            import tensorflow as tf

            return tf.function(self._traced, jit_compile=True, autograph=False)
        if backend == "torch":
            import torch

            def no_grad(encoder_token_ids):
                with torch.no_grad():
                    return self._traced(encoder_token_ids)

            return no_grad
        return self._traced

    def __call__(self, encoder_token_ids):
        ids = keras.ops.convert_to_tensor(encoder_token_ids, "int32")
        return self._compiled(ids)


_COMPILED = {}


def compiled_search(model, key, fn):
    """The `CompiledSearch` of `fn` for `model` and the static arguments
    `key`, created once and reused (so its programs are reused too)."""
    cache_key = (id(model),) + tuple(key)
    search = _COMPILED.get(cache_key)
    if search is None or search.model is not model:
        search = _COMPILED[cache_key] = CompiledSearch(model, fn)
    return search
