"""Keeping the memory a training step frees inside the process, on JAX and
PyTorch on Linux.

Both backends allocate large buffers through glibc's `malloc`: XLA's CPU
runtime one scratch buffer per run of a compiled program (about 500 MB for
the benchmarks' reference training step), PyTorch every `(batch, seq, V)`
tensor of the logits and the loss. glibc maps blocks that large from the
system and unmaps them when they are freed, so every page of them faults
again at the next step (docs/RESULTS.md). TensorFlow's own allocator
keeps its memory.
"""

import ctypes
import os
import platform
import sys

import keras

# `mallopt` parameters, from glibc's <malloc.h>.
_M_TRIM_THRESHOLD = -1
_M_MMAP_MAX = -4
OPT_OUT = "KERAS_TRANSFORMER_KEEP_FREED_MEMORY"  # "0" leaves malloc as it is


def keep_freed_memory():
    """Makes glibc's `malloc` hand freed blocks out again instead of giving
    them back to the system: no `mmap` for large blocks and no trimming of
    the heap below 2 GB free. The process then holds on to its peak memory.

    A thread other than the main one allocates from an arena of its own,
    whose heaps hold at most 64 MB, so it maps any larger block afresh
    whatever the settings. On JAX a program therefore runs in the calling
    thread (`jax_cpu_enable_async_dispatch` off), so that its scratch
    buffer comes from the main thread's heap. One arena for every thread
    did that too, but made XLA compile each program 1.3-1.4x slower
    (docs/RESULTS.md). PyTorch's large tensors come from the calling
    thread already.

    The command-line programs and the benchmarks call it first thing. On
    JAX it has to come before the first computation, which creates the CPU
    client: in a notebook, call it first.

    Returns:
        True where it was set: JAX or PyTorch, Linux with glibc, and
        `KERAS_TRANSFORMER_KEEP_FREED_MEMORY` not "0".
    """
    backend = keras.backend.backend()
    if (backend not in ("jax", "torch") or not sys.platform.startswith("linux")
            or platform.libc_ver()[0] != "glibc" or os.environ.get(OPT_OUT) == "0"):
        return False
    if backend == "jax":
        import jax

        jax.config.update("jax_cpu_enable_async_dispatch", False)
    settings = [(_M_MMAP_MAX, 0), (_M_TRIM_THRESHOLD, 2**31 - 1)]
    mallopt = ctypes.CDLL(None).mallopt
    return all(mallopt(parameter, value) == 1 for parameter, value in settings)
