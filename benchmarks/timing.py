"""Side-by-side timing: both sides in one process, alternating, after a
warm-up (compile) call each; the median ratio with its min and max. Training
steps are timed inside `fit`, the path `train` and a Keras user take."""

import statistics
import time

import keras
import numpy as np


def compiled(fn):
    """`fn` compiled as the backend compiles a training step: `jax.jit`,
    `tf.function` with XLA, or as it is on PyTorch (eager)."""
    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        return jax.jit(fn)
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.function(fn, jit_compile=True)
    return fn


def timed(fn, *args):
    """Seconds for `fn(*args)`, waiting for its result (the first output
    when it returns a tuple) to be computed."""
    start = time.perf_counter()
    out = fn(*args)
    keras.ops.convert_to_numpy(out[0] if isinstance(out, tuple) else out)
    return time.perf_counter() - start


class _StepEnds(keras.callbacks.Callback):
    """When each training step of a `fit` call ends. Keras hands a callback
    that is not async-safe the step's logs as Python numbers, so it first
    waits for the step's computation."""

    def on_train_begin(self, logs=None):
        self.times, self.loss = [], None

    def on_train_batch_end(self, batch, logs=None):
        self.times.append(time.perf_counter())
        self.loss = logs["loss"]


def fit_steps(model, batches):
    """Trains the compiled `model` on the `(inputs, labels)` batches, all
    of one shape, in one `fit` call, from a tf.data pipeline with the
    autotuner off, as `train` does; where TensorFlow is not installed (a
    JAX or PyTorch GPU image), from a generator of the same batches.
    Returns `(seconds, loss)`: from the end of the first step to the end
    of the last (so neither `fit`'s setup nor the pipeline's start is
    timed), and the mean loss over the steps."""
    try:
        import tensorflow as tf
    except ImportError:
        dataset, steps = (batch for batch in batches), len(batches)
    else:
        from keras_transformer.data.pipeline import without_autotuning

        stacked = keras.tree.map_structure(lambda *rows: np.stack(rows), *batches)
        dataset = without_autotuning(tf.data.Dataset.from_tensor_slices(stacked))
        steps = None
    step_ends = _StepEnds()
    model.fit(dataset, epochs=1, steps_per_epoch=steps, verbose=0, shuffle=False,
              callbacks=[step_ends])
    return step_ends.times[-1] - step_ends.times[0], np.float32(step_ends.loss)


def compare(a, b, data, rounds, self_timed=False, peak=None):
    """Times `a(data)` and `b(data)`, alternating, after one warm-up call
    each; returns their median seconds, the ratio b / a (median, min,
    max) and every time. With `self_timed`, each call returns
    `(seconds, ...)`, having timed its own work (as `fit_steps`). With
    `peak` (a function returning FLOP/s), the machine's speed is read
    before the first timed call and after each one, and every call is
    credited the mean of the readings on either side of it (`a_peaks`,
    `b_peaks`): on a shared machine whose speed swings within minutes, a
    reading beside each call is what its utilisation can be divided by."""
    # Compile, and wait: JAX returns before it computes, so an unawaited
    # warm-up of `b` would run inside the first timing of `a`.
    timed(a, data), timed(b, data)
    times = {"a": [], "b": []}
    peaks = {"a": [], "b": []}
    reading = peak() if peak else None
    for _ in range(rounds):
        for side, fn in (("a", a), ("b", b)):
            times[side].append(fn(data)[0] if self_timed else timed(fn, data))
            if peak:
                before, reading = reading, peak()
                peaks[side].append((before + reading) / 2)
    ratios = [tb / ta for ta, tb in zip(times["a"], times["b"])]
    result = {
        "a_s": statistics.median(times["a"]), "b_s": statistics.median(times["b"]),
        "ratio_median": statistics.median(ratios), "ratio_min": min(ratios),
        "ratio_max": max(ratios), "a_times": times["a"], "b_times": times["b"],
    }
    if peak:
        result.update(a_peaks=peaks["a"], b_peaks=peaks["b"])
    return result
