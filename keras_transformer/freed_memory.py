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
_M_ARENA_MAX = -8
OPT_OUT = "KERAS_TRANSFORMER_KEEP_FREED_MEMORY"  # "0" leaves malloc as it is


def keep_freed_memory():
    """Makes glibc's `malloc` hand freed blocks out again instead of giving
    them back to the system: no `mmap` for large blocks, no trimming of the
    heap below 2 GB free, and on JAX one arena for every thread (XLA
    allocates from its own threads, whose arenas map any block over 64 MB
    afresh). PyTorch's threads keep their arenas: its large tensors come
    from the calling thread, and its bfloat16 kernels allocate from every
    thread at once, where one arena made the step 1.5x slower. The process
    then holds on to its peak memory.

    The command-line programs and the benchmarks call it first thing. On
    JAX it applies to threads that have not allocated yet: in a notebook,
    call it before the first computation.

    Returns:
        True where it was set: JAX or PyTorch, Linux with glibc, and
        `KERAS_TRANSFORMER_KEEP_FREED_MEMORY` not "0".
    """
    backend = keras.backend.backend()
    if (backend not in ("jax", "torch") or not sys.platform.startswith("linux")
            or platform.libc_ver()[0] != "glibc" or os.environ.get(OPT_OUT) == "0"):
        return False
    settings = [(_M_MMAP_MAX, 0), (_M_TRIM_THRESHOLD, 2**31 - 1)]
    if backend == "jax":
        settings.append((_M_ARENA_MAX, 1))
    mallopt = ctypes.CDLL(None).mallopt
    return all(mallopt(parameter, value) == 1 for parameter, value in settings)
