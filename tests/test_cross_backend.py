"""Every kind of model saved on each backend loads on the other two with
the same logits.

Each backend runs in its own process (the backend is fixed at import), so
this module runs once, not once per backend: `make test` selects it with
`-m once`.
"""

import json
import os
import subprocess
import sys

import pytest

BACKENDS = ["tensorflow", "jax", "torch"]

SAVE = """
import keras, numpy as np, keras_transformer as kt
keras.utils.set_random_seed(7)
ids = np.array([[1, 4, 5, 2, 7, 0], [1, 2, 3, 4, 2, 8]], "int32")
segments = np.array([[0, 0, 0, 0, 1, 0], [0, 0, 0, 0, 0, 1]], "int32")
encoder = kt.BidirectionalEncoder.from_preset("bert_tiny", vocabulary_size=40)
models = {
    "transformer": (
        kt.Transformer.from_preset("tiny", vocabulary_size=40, num_heads=2,
                                   key_dim=32, value_dim=16),
        {"encoder_token_ids": np.array([[5, 6, 7, 8, 0], [9, 3, 0, 0, 0]], "int32"),
         "decoder_token_ids": np.array([[1, 4, 5, 0], [1, 2, 3, 4]], "int32")},
        np.array([[4, 5, 2, 0], [2, 3, 4, 2]], "int32"),
    ),
    "causal_lm": (kt.CausalLM.from_preset("gpt_tiny", vocabulary_size=40,
                                          norm_first=True),
                  {"token_ids": ids}, np.roll(ids, -1, axis=1)),
    "masked_lm": (kt.MaskedLM(encoder),
                  {"token_ids": ids, "segment_ids": segments,
                   "mask_positions": np.array([[1, 2], [3, 0]], "int32")},
                  np.array([[9, 8], [7, 6]], "int32")),
    "classifier": (kt.SequenceClassifier(encoder, num_classes=3),
                   {"token_ids": ids, "segment_ids": segments},
                   np.array([2, 0], "int32")),
}
for name, (model, inputs, labels) in models.items():
    model.compile(optimizer=kt.transformer_adam(32),
                  loss=kt.LabelSmoothedCrossEntropy())
    model.train_on_batch(inputs, labels)
    model.save(f"{OUT}_{name}.keras")
    np.savez(f"{OUT}_{name}.npz", logits=keras.ops.convert_to_numpy(model(inputs)),
             **inputs)
"""

KINDS = ["transformer", "causal_lm", "masked_lm", "classifier"]

LOAD = """
import keras, numpy as np, keras_transformer
for saved in OUT:
    data = dict(np.load(saved + ".npz"))
    expected = data.pop("logits")
    model = keras.saving.load_model(saved + ".keras")
    logits = keras.ops.convert_to_numpy(model(data))
    diff = float(np.abs(logits - expected).max())
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
        others = [f"{tmp_path / saver}_{kind}" for saver in BACKENDS if saver != loader
                  for kind in KINDS]
        lines = run(loader, LOAD, others)[-len(others):]
        assert [line.split()[0] for line in lines] == others
        for line in lines:
            saved, max_diff, iterations = line.split()
            assert float(max_diff) <= 1e-5, (saved, loader, max_diff)
            assert int(iterations) == 1
