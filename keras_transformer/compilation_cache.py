"""A persistent cache of compiled XLA programs, on JAX.

JAX compiles one program per training-step shape (one per length bucket)
and per decoding shape, and forgets them when the process ends. With the
cache on disk, a run resumed with `--resume`, a second demo or a
`translate` command loads the programs an earlier process compiled instead
of compiling them again.

JAX's default threshold is kept: only programs that took over 1 s to
compile are written, as caching every program also wrote one per eager op
and slowed eager code down (docs/RESULTS.md).

TensorFlow's graph mode and PyTorch have no such cache to turn on; there
this is a no-op.
"""

import os

import keras

MAX_CACHE_BYTES = 2**30  # least recently used programs are evicted past this


def default_cache_dir():
    """`$XDG_CACHE_HOME/keras_transformer/xla` (`~/.cache/...` by default)."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(root, "keras_transformer", "xla")


def enable_compilation_cache():
    """Turns JAX's persistent compilation cache on, in `default_cache_dir()`,
    unless a directory is already set, e.g. by `JAX_COMPILATION_CACHE_DIR`,
    which then wins.

    Returns:
        The cache directory in use, or None on other backends or where
        `jax_enable_compilation_cache` is off.
    """
    if keras.backend.backend() != "jax":
        return None
    import jax

    if not jax.config.jax_enable_compilation_cache:
        return None
    if jax.config.jax_compilation_cache_dir:
        return jax.config.jax_compilation_cache_dir
    directory = default_cache_dir()
    jax.config.update("jax_compilation_cache_dir", directory)
    jax.config.update("jax_compilation_cache_max_size", MAX_CACHE_BYTES)
    return directory
