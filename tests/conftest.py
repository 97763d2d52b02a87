"""Shared test helpers. The backend is chosen by KERAS_BACKEND (the Makefile
runs the suite once per backend)."""

import os
import sys

import keras
import numpy as np
import pytest

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
