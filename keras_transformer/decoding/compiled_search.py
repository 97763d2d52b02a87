"""Compiling a whole decoding loop once per input shape, on every backend.

The search functions are written with `keras.ops` only (`while_loop` for the
loop). This module is the one place that knows the backends, because each
compiles differently:

- JAX: `jax.jit`, with the model's variables passed in as arguments
  (`keras.StatelessScope`) so the weights are not baked into the program;
  so is the random state of a sampler, whose new value comes back out.
- TensorFlow: `tf.function(jit_compile=True)`, i.e. XLA.
- PyTorch: the loop (whose length is data dependent) runs in Python under
  `torch.no_grad()`, and its body as a TorchScript trace, recorded once
  per input shape (`search_loop`); the key/value caches are written in
  place (`write_cache`).

jax.jit and tf.function cache one program per input shape, so decoding a
second batch of the same shape bucket reuses it. Float settings such as the
length penalty's alpha are passed in as scalar tensors, not baked in, so
the same programs serve every value. `trace_count` counts how many times
the Python function was traced, for tests. Called inside a function being
traced (a SavedModel export), a search becomes part of that program.
"""

import contextvars
import warnings

import keras

# The traces of the `CompiledSearch` being called on PyTorch (`search_loop`).
_TRACES = contextvars.ContextVar("search_traces", default=None)


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
        self.traces = {}  # PyTorch's loop bodies, by input shape (`search_loop`)
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

            function = tf.function(self._traced, jit_compile=True, autograph=False)

            def run(*args):
                # One program per shape bucket is the design, so each is found
                # (or traced) by `get_concrete_function`, which, unlike a call,
                # does not count towards TensorFlow's warning about frequent
                # retracing; tf.function keeps the programs.
                return function.get_concrete_function(*args)(*args)

            return run
        if backend == "torch":
            import torch

            def no_grad(*args):
                token = _TRACES.set(self.traces)
                try:
                    with torch.no_grad():
                        return self._traced(*args)
                finally:
                    _TRACES.reset(token)

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


def search_loop(model, cond, body, loop_vars, maximum_iterations, constants=()):
    """`keras.ops.while_loop` for a search over `model`, whose `body` is
    called as `body(constants, *state)` and `cond` as `cond(*state)`; on
    PyTorch without autograd, `body` runs as a TorchScript trace.

    Eager PyTorch spends most of a decoding step in Python: each of a
    step's ~45 Keras layer calls and ~400 `keras.ops` calls costs 10-100 us
    before its kernel starts, more in all than the kernels at `small`'s
    size. A trace of the body, recorded on the first step and replayed for
    every step, runs the same kernels without that Python (docs/RESULTS.md).
    `torch.compile` is not used: it took 95 s to compile this body and
    broke it into 17 graphs.

    A trace keeps as constants every tensor that is not one of its inputs
    or weights, and the Python values (shapes, settings) it read. So the
    tensors that differ from call to call (those computed from the
    source) must come in as `constants`, never through `body`'s closure,
    and `body` must not branch on a tensor's value. Inside a
    `CompiledSearch` the trace is then kept and replayed by its later
    calls of the same shapes, as jax.jit and XLA keep their programs;
    elsewhere it is recorded for the one call.
    """
    torch = _torch_without_autograd()
    if torch is None:
        return keras.ops.while_loop(
            cond, lambda *state: body(constants, *state), loop_vars, maximum_iterations)
    if not bool(cond(*loop_vars)) or maximum_iterations < 1:
        return loop_vars
    state = tuple(keras.tree.flatten(loop_vars))
    inputs = tuple(keras.tree.flatten(constants))
    weights = [v.value for v in model.variables]

    def unflatten(flat):
        return keras.tree.pack_sequence_as(loop_vars, flat)

    class Body(torch.nn.Module):
        """The body on flat tensors. The weights are its parameters: a
        trace refuses tensors that require gradients as constants."""

        def __init__(self):
            super().__init__()
            self.weights = torch.nn.ParameterList(weights)

        def forward(self, *flat):
            given = keras.tree.pack_sequence_as(constants, flat[len(state):])
            return tuple(keras.tree.flatten(body(given, *unflatten(flat[:len(state)]))))

    traces = _TRACES.get()
    key = (body.__code__, *map(id, weights),
           *((tuple(x.shape), x.dtype, x.device) for x in state + inputs))
    # TorchScript's optimizing executor profiles a trace's first runs and
    # then compiles fused kernels for it (on a GPU): without it an H200's
    # beam search took 1.1 s instead of 2.4 s, this CPU's 15% less.
    with warnings.catch_warnings(), torch.jit.optimized_execution(False):
        # Shapes read as Python numbers are fixed per trace, and PyTorch
        # marks the tracer deprecated in favour of torch.compile (above).
        warnings.simplefilter("ignore")
        traced = None if traces is None else traces.get(key)
        if traced is None:
            traced = torch.jit.trace(Body(), state + inputs, check_trace=False)
            if traces is not None:
                traces[key] = traced
        for _ in range(maximum_iterations):
            state = traced(*state, *inputs)
            if not bool(cond(*unflatten(state))):
                break
    return unflatten(state)


def write_cache(cache, update, start):
    """`keras.ops.slice_update(cache, start, update)`, in place on PyTorch
    when autograd is off.

    On PyTorch, `ops.slice_update` copies the whole buffer each step: at
    `gpt_mini`'s size that was 12% of a generation step. Where the loop
    owns its buffers (autograd off), the new keys and values are written
    into them; `narrow` takes tensor starts, so a traced step
    (`search_loop`) writes at each step's own position. Wherever gradients
    are recorded, and on the compiling backends (where XLA already updates
    in place), `ops.slice_update` runs.
    """
    if _torch_without_autograd() is None:
        return keras.ops.slice_update(cache, start, update)
    view = cache
    for axis, (i, n) in enumerate(zip(start, update.shape)):
        view = view.narrow(axis, i, n)
    view.copy_(update)
    return cache


def _torch_without_autograd():
    """The `torch` module where the backend is PyTorch and autograd is off
    (a search's loop, which owns its buffers), else None."""
    if keras.backend.backend() != "torch":
        return None
    import torch

    return None if torch.is_grad_enabled() else torch


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
