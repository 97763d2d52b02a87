"""A model saved on each backend loads on the other two with the same logits.

Each backend runs in its own process (the backend is fixed at import), so
this module runs once, not once per backend: `make test` selects it with
`-m once`.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

BACKENDS = ["tensorflow", "jax", "torch"]

SAVE = """
import keras, numpy as np, keras_transformer as kt
keras.utils.set_random_seed(7)
model = kt.Transformer.from_preset("tiny", vocabulary_size=40, num_heads=2,
                                   key_dim=32, value_dim=16)
inputs = {"encoder_token_ids": np.array([[5, 6, 7, 8, 0], [9, 3, 0, 0, 0]], "int32"),
          "decoder_token_ids": np.array([[1, 4, 5, 0], [1, 2, 3, 4]], "int32")}
model.compile(optimizer=kt.transformer_adam(model.d_model),
              loss=kt.LabelSmoothedCrossEntropy())
model.train_on_batch(inputs, np.array([[4, 5, 2, 0], [2, 3, 4, 2]], "int32"))
model.save(OUT + ".keras")
np.savez(OUT + ".npz", logits=keras.ops.convert_to_numpy(model(inputs)), **inputs)
"""

LOAD = """
import keras, numpy as np, keras_transformer
for saved in OUT:
    data = np.load(saved + ".npz")
    model = keras.saving.load_model(saved + ".keras")
    inputs = {k: data[k] for k in ("encoder_token_ids", "decoder_token_ids")}
    logits = keras.ops.convert_to_numpy(model(inputs))
    diff = float(np.abs(logits - data["logits"]).max())
    print(saved, diff, int(model.optimizer.iterations))
"""


def run(backend, script, out):
    env = dict(os.environ, KERAS_BACKEND=backend)
    result = subprocess.run(
        [sys.executable, "-c", f"OUT = {json.dumps(out)}\n" + script],
        env=env, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.strip().splitlines()


@pytest.mark.once
def test_saved_on_each_backend_loads_on_the_others(tmp_path):
    for saver in BACKENDS:
        run(saver, SAVE, str(tmp_path / saver))
    for loader in BACKENDS:
        others = [str(tmp_path / saver) for saver in BACKENDS if saver != loader]
        lines = run(loader, LOAD, others)[-2:]
        assert [line.split()[0] for line in lines] == others
        for line in lines:
            saved, max_diff, iterations = line.split()
            assert float(max_diff) <= 1e-5, (saved, loader, max_diff)
            assert int(iterations) == 1
