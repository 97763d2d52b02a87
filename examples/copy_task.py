"""Train the tiny preset on copy-and-reverse with the paper's recipe, save it
to a .keras file, reload it and decode a few examples with cached greedy
search.

    KERAS_BACKEND=jax python examples/copy_task.py
"""

import os
import tempfile

import keras

import keras_transformer as kt
from keras_transformer.data import copy_reverse_task
from keras_transformer.decoding import greedy_search


def main():
    keras.utils.set_random_seed(0)
    x, y = copy_reverse_task(4096, seed=0)
    x_val, y_val = copy_reverse_task(512, seed=1)
    model = kt.Transformer.from_preset("tiny", vocabulary_size=12, dropout_rate=0.0)
    model.compile(
        optimizer=kt.transformer_adam(model.d_model, warmup_steps=100),
        loss=kt.LabelSmoothedCrossEntropy(epsilon=0.1),
        metrics=[kt.MaskedAccuracy()],
        jit_compile=keras.backend.backend() != "torch",
    )
    model.summary()
    model.fit(x, y, batch_size=64, epochs=12, validation_data=(x_val, y_val),
              verbose=2)

    path = os.path.join(tempfile.mkdtemp(), "copy_reverse.keras")
    model.save(path)
    restored = keras.saving.load_model(path)
    print(f"saved and reloaded {path}")

    source = x_val["encoder_token_ids"][:5]
    predicted, _ = greedy_search(restored, source, max_extra_length=1)
    for src, out in zip(source, predicted):
        out = out.tolist()
        out = out[: out.index(restored.eos_id)] if restored.eos_id in out else out
        print(f"{src[src != restored.pad_id].tolist()} -> {out}")


if __name__ == "__main__":
    main()
