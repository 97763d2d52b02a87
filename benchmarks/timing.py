"""Side-by-side timing: both sides in one process, alternating, after a
warm-up (compile) call each; the median ratio with its min and max."""

import statistics
import time

import keras


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


def compare(a, b, data, rounds):
    """Times `a(data)` and `b(data)`, alternating, after one warm-up call
    each; returns their median seconds, the ratio b / a (median, min,
    max) and every time."""
    # Compile, and wait: JAX returns before it computes, so an unawaited
    # warm-up of `b` would run inside the first timing of `a`.
    timed(a, data), timed(b, data)
    times = {"a": [], "b": []}
    for _ in range(rounds):
        times["a"].append(timed(a, data))
        times["b"].append(timed(b, data))
    ratios = [tb / ta for ta, tb in zip(times["a"], times["b"])]
    return {
        "a_s": statistics.median(times["a"]), "b_s": statistics.median(times["b"]),
        "ratio_median": statistics.median(ratios), "ratio_min": min(ratios),
        "ratio_max": max(ratios), "a_times": times["a"], "b_times": times["b"],
    }
