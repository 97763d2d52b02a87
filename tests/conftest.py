"""Shared test helpers. The backend is chosen by KERAS_BACKEND (the Makefile
runs the suite once per backend)."""

import atexit
import os
import shutil
import sys
import tempfile

# One JAX compilation cache for the whole run, subprocesses included, and
# not the user's: a program compiled by one test is loaded by the next that
# needs it (keras_transformer.compilation_cache). Set before JAX starts.
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(prefix="xla-cache-")
    atexit.register(shutil.rmtree, os.environ["JAX_COMPILATION_CACHE_DIR"], ignore_errors=True)

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

# Make `tests.helpers` importable however pytest is launched.
sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))


@pytest.fixture(autouse=True)
def _fresh_keras_state():
    """Each test starts from float32 and a known seed."""
    keras.config.set_dtype_policy("float32")
    keras.utils.set_random_seed(1234)
    np.random.seed(1234)
    yield
    keras.config.set_dtype_policy("float32")
