"""Compiling a whole decoding loop once per input shape, on every backend.

The search functions are written with `keras.ops` only (`while_loop` for the
loop). This module is the one place that knows the backends, because each
compiles differently:

- JAX: `jax.jit`, with the model's variables passed in as arguments
  (`keras.StatelessScope`) so the weights are not baked into the program;
  so is the random state of a sampler, whose new value comes back out.
- TensorFlow: `tf.function(jit_compile=True)`, i.e. XLA.
- PyTorch: no tracing compiler is used (the loop's length is data
  dependent); the loop runs eagerly under `torch.no_grad()`, so no autograd
  graph is recorded, and the key/value caches are written in place
  (`write_cache`).

jax.jit and tf.function cache one program per input shape, so decoding a
second batch of the same shape bucket reuses it. Float settings such as the
length penalty's alpha are passed in as scalar tensors, not baked in, so
the same programs serve every value. `trace_count` counts how many times
the Python function was traced, for tests. Called inside a function being
traced (a SavedModel export), a search becomes part of that program.
"""

import keras


class CompiledSearch:
    """`fn(encoder_token_ids, *floats) -> outputs`, compiled for the current
    backend.

    Args:
        model: the model whose variables `fn` reads.
        fn: a function written with `keras.ops` of one int tensor
            `(batch, len)` and any number of float32 scalar tensors.
        state: variables `fn` updates (a sampler's seed state).
    """

    def __init__(self, model, fn, state=()):
        self.model = model
        self.fn = fn
        self.state = list(state)
        self.trace_count = 0
        self._compiled = self._compile()

    def _traced(self, encoder_token_ids, *floats):
        self.trace_count += 1  # runs only while tracing on JAX and TensorFlow
        return self.fn(encoder_token_ids, *floats)

    def _compile(self):
        backend = keras.backend.backend()
        if backend == "jax":
            import jax

            variables = self.model.variables + self.state

            def stateless(values, *args):
                mapping = list(zip(variables, values))
                with keras.StatelessScope(state_mapping=mapping) as scope:
                    outputs = self._traced(*args)
                return outputs, [scope.get_current_value(v) for v in self.state]

            jitted = jax.jit(stateless)

            def run(*args):
                outputs, state = jitted([v.value for v in variables], *args)
                for variable, value in zip(self.state, state):
                    variable.assign(value)
                return outputs

            return run
        if backend == "tensorflow":
            import tensorflow as tf

            return tf.function(self._traced, jit_compile=True, autograph=False)
        if backend == "torch":
            import torch

            def no_grad(*args):
                with torch.no_grad():
                    return self._traced(*args)

            return no_grad
        return self._traced

    def __call__(self, encoder_token_ids, *floats):
        ids = keras.ops.convert_to_tensor(encoder_token_ids, "int32")
        floats = [keras.ops.convert_to_tensor(x, "float32") for x in floats]
        return self._compiled(ids, *floats)


def compiled_search(model, key, fn, state=()):
    """The `CompiledSearch` of `fn` (and its `state`) for `model` and the
    static arguments `key`, created once and reused (so its programs are
    reused too).

    The searches are kept on the model (`model_searches`), so they live
    and die with it: no global table keeps a model alive or hands its
    programs to another.
    """
    searches = model_searches(model)
    key = tuple(key)
    if key not in searches:
        searches[key] = CompiledSearch(model, fn, state)
    return searches[key]


def model_searches(model):
    """The dict of `model`'s compiled searches, by static arguments."""
    if "_compiled_searches" not in vars(model):
        # Set past Keras's attribute tracking: programs are not model state.
        object.__setattr__(model, "_compiled_searches", {})
    return vars(model)["_compiled_searches"]


def write_cache(cache, update, start):
    """`keras.ops.slice_update(cache, start, update)`, in place on PyTorch
    when autograd is off.

    PyTorch's decoding loop runs eagerly (see above), where
    `ops.slice_update` copies the whole buffer each step: at `gpt_mini`'s
    size that was 12% of a generation step. There the loop owns its
    buffers, so the new keys and values are written into them. Wherever
    gradients are recorded, and on the compiling backends (where XLA
    already updates in place), `ops.slice_update` runs.
    """
    if keras.backend.backend() == "torch":
        import torch

        if not torch.is_grad_enabled():
            cache[tuple(slice(int(i), int(i) + n) for i, n in zip(start, update.shape))] = update
            return cache
    return keras.ops.slice_update(cache, start, update)


def is_traced(x):
    """Whether `x` is a placeholder of a program being traced (inside
    `tf.function` or `jax.jit`), whose values are not known yet."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.is_symbolic_tensor(x)
    if backend == "jax":
        import jax

        return isinstance(x, jax.core.Tracer)
    return False
