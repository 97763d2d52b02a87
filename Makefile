# `make demo` and `make test` are all a new user needs (see README.md).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export TF_CPP_MIN_LOG_LEVEL := 2
export PYTHONUNBUFFERED := 1

.PHONY: install demo baseline test test-backend clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

demo: install
	KERAS_BACKEND=$${KERAS_BACKEND:-tensorflow} $(PY) -m keras_transformer train

# The demo, then the plain keras.io-style baseline for the same 10 minutes
# (benchmarks/baseline.py): both scores and their ratios.
baseline: install
	KERAS_BACKEND=$${KERAS_BACKEND:-tensorflow} $(PY) -m benchmarks.baseline --demo

# The whole suite once per backend, then the tests marked `once` (the
# cross-backend checks, the notebooks, the fuzz tests with their case
# counts and times, the hostile-input table); fails if any run fails,
# after running them all. JAX's run goes beside TensorFlow's and then
# PyTorch's, its output held until the end: the suite spends much of its
# time in one thread (compiling, tracing, starting processes), so two
# runs at once keep both cores busy (docs/RESULTS.md). PyTorch's run takes
# one thread: beside a busy core its OpenMP threads wait for each other at
# every small operation (a `tiny` epoch 14.1 s with two, 4.0 s with one).
LOGS := build/test-logs
test: install
	@mkdir -p $(LOGS); rm -f $(LOGS)/*; \
	(KERAS_BACKEND=jax $(PY) -m pytest -q -m "not once" >$(LOGS)/jax.log 2>&1; \
	 echo $$? >$(LOGS)/jax.status) & \
	status=0; \
	echo "=== KERAS_BACKEND=tensorflow"; \
	KERAS_BACKEND=tensorflow $(PY) -m pytest -q -m "not once" || status=1; \
	echo "=== KERAS_BACKEND=torch"; \
	OMP_NUM_THREADS=1 KERAS_BACKEND=torch $(PY) -m pytest -q -m "not once" || status=1; \
	wait; \
	echo "=== KERAS_BACKEND=jax"; cat $(LOGS)/jax.log; \
	[ "$$(cat $(LOGS)/jax.status)" = 0 ] || status=1; \
	echo "=== once: cross-backend, notebooks, fuzzing, hostile inputs"; \
	$(PY) -m pytest -q -m once --hypothesis-show-statistics || status=1; \
	exit $$status

# One backend only, e.g. `make test-backend BACKEND=jax`.
test-backend: install
	KERAS_BACKEND=$(BACKEND) $(PY) -m pytest -q -m "not once"

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
