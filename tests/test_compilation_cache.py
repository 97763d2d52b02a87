"""The persistent XLA compilation cache that `train` and `translate` turn on."""

import os
import subprocess
import sys

import keras

from keras_transformer.compilation_cache import default_cache_dir, enable_compilation_cache

# In a fresh process: JAX's cache directory can be set once, before the
# first compile, and this test process already has conftest's.
COMPILE = """
import keras
from keras_transformer.compilation_cache import enable_compilation_cache
directory = enable_compilation_cache()
step = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4)])
step.compile(loss="mse", jit_compile=True)
step.predict(keras.ops.ones((2, 8)), verbose=0)
print(directory)
"""


def run(env):
    # Every program cached, however quick to compile (JAX's default: > 1 s).
    env = {**os.environ, "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0", **env}
    env = {k: v for k, v in env.items() if v is not None}
    done = subprocess.run([sys.executable, "-c", COMPILE], env=env, capture_output=True,
                          text=True, check=True)
    return done.stdout.strip().splitlines()[-1]


def test_default_directory_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_cache_dir() == str(tmp_path / "keras_transformer" / "xla")
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert default_cache_dir() == os.path.expanduser("~/.cache/keras_transformer/xla")


def test_programs_land_in_the_cache(tmp_path):
    if keras.backend.backend() != "jax":
        assert enable_compilation_cache() is None  # no cache to turn on
        return
    # By default under XDG_CACHE_HOME.
    directory = run({"JAX_COMPILATION_CACHE_DIR": None, "XDG_CACHE_HOME": str(tmp_path)})
    assert directory == str(tmp_path / "keras_transformer" / "xla")
    assert predict_steps(directory) == 1
    # The user's own directory wins.
    own = tmp_path / "own"
    assert run({"JAX_COMPILATION_CACHE_DIR": str(own)}) == str(own)
    assert predict_steps(own) == 1


def predict_steps(directory):
    """Compiled `predict_step` programs in the cache `directory`."""
    return sum(f.startswith("jit_predict_step-") and f.endswith("-cache")
               for f in os.listdir(directory))
