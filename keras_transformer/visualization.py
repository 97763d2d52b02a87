"""Pictures of the paper's moving parts, with matplotlib.

- `attention_maps` + `plot_attention`: what each head of each layer attends
  to for one translated sentence (encoder self-attention, decoder masked
  self-attention, encoder-decoder attention), tokens on the axes, as the
  paper's Figures 3-5.
- `plot_positional_encoding`: the sinusoids of section 3.5.
- `plot_learning_rate`: the warmup schedule of section 5.3.
- `plot_training_curves`: loss and accuracy from a training run directory.

Every function returns a `matplotlib.figure.Figure` (save it with
`fig.savefig(path)`); nothing is shown unless the caller asks.
"""

import csv
import os

import numpy as np
from keras import ops

from keras_transformer.checks import check_choice
from keras_transformer.data.tokenizer import detokenize
from keras_transformer.layers.positional_encoding import PositionalEncoding

ATTENTION_KINDS = ("encoder", "decoder", "cross")


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError(
            "keras_transformer.visualization needs matplotlib: "
            "pip install 'keras-transformer[viz]'"
        ) from None
    return plt


def _pieces(tokenizer, ids):
    return [str(tokenizer.id_to_token(int(i))) for i in ids]


def attention_maps(translator, sentence):
    """Translates `sentence` and collects every attention weight.

    Args:
        translator: a `keras_transformer.Translator`.
        sentence: str.

    Returns:
        A dict: "translation" (str), "source_tokens" (subword pieces, eos
        included), "target_tokens" (bos + output pieces), and "encoder",
        "decoder", "cross": float32 NumPy arrays `(layers, heads, queries,
        keys)`: source x source, target x target, target x source.
    """
    model = translator.model
    source = translator.encode([sentence])[0]  # pieces + eos, truncated
    output, _ = translator.translate_ids(np.asarray([source], "int32"))
    output = translator.until_eos(output[0])
    target = [model.bos_id] + output
    encoded, mask, encoder_scores = model.encode(
        np.asarray([source], "int32"), return_attention_scores=True
    )
    _, (self_scores, cross_scores) = model.decode(
        np.asarray([target], "int32"), encoded, mask, return_attention_scores=True
    )

    def stack(scores):  # layers x (1, heads, q, k) --> (layers, heads, q, k)
        return np.stack([ops.convert_to_numpy(ops.cast(s[0], "float32")) for s in scores])

    return {
        "translation": detokenize(translator.tokenizer, [output])[0],
        "source_tokens": _pieces(translator.tokenizer, source),
        "target_tokens": _pieces(translator.tokenizer, target),
        "encoder": stack(encoder_scores),
        "decoder": stack(self_scores),
        "cross": stack(cross_scores),
    }


def plot_attention(maps, kind="cross", layers=None, heads=None, cell_size=1.6):
    """A grid of attention maps: one row per layer, one column per head.

    Args:
        maps: the dict from `attention_maps`.
        kind: "encoder" (source self-attention), "decoder" (masked target
            self-attention) or "cross" (target queries over the source).
        layers, heads: lists of indices to show (default: all).
        cell_size: inches per map.

    Returns:
        A matplotlib `Figure`.
    """
    check_choice("kind", kind, ATTENTION_KINDS)
    plt = _pyplot()
    weights = maps[kind]  # (layers, heads, queries, keys)
    layers = list(range(weights.shape[0])) if layers is None else list(layers)
    heads = list(range(weights.shape[1])) if heads is None else list(heads)
    queries = maps["source_tokens"] if kind == "encoder" else maps["target_tokens"]
    keys = maps["target_tokens"] if kind == "decoder" else maps["source_tokens"]
    figure, axes = plt.subplots(
        len(layers), len(heads), squeeze=False,
        figsize=(cell_size * len(heads) + 1, cell_size * len(layers) + 0.5),
    )
    for row, layer in enumerate(layers):
        for column, head in enumerate(heads):
            axis = axes[row, column]
            axis.imshow(weights[layer, head], cmap="viridis", vmin=0.0, vmax=1.0)
            axis.set_xticks(range(len(keys)), keys, rotation=90, fontsize=6)
            axis.set_yticks(range(len(queries)), queries, fontsize=6)
            axis.set_title(f"layer {layer + 1}, head {head + 1}", fontsize=7)
    titles = {"encoder": "encoder self-attention", "decoder": "decoder self-attention",
              "cross": "encoder-decoder attention"}
    figure.suptitle(titles[kind])
    figure.tight_layout()
    return figure


def plot_positional_encoding(max_length=100, d_model=512):
    """The sinusoidal encoding matrix `(positions, dimensions)` (section 3.5)."""
    plt = _pyplot()
    encoding = PositionalEncoding(max_length)
    table = ops.convert_to_numpy(encoding(ops.zeros((1, max_length, d_model))))[0]
    figure, axis = plt.subplots(figsize=(8, 4))
    image = axis.pcolormesh(table, cmap="RdBu", vmin=-1, vmax=1)
    axis.set_xlabel("dimension i")
    axis.set_ylabel("position")
    axis.set_title(f"sinusoidal positional encoding, d_model={d_model}")
    figure.colorbar(image, ax=axis)
    return figure


def plot_learning_rate(schedule, steps=20000):
    """A `LearningRateSchedule` over `steps` optimizer steps (section 5.3)."""
    plt = _pyplot()
    iterations = np.arange(steps)
    rates = ops.convert_to_numpy(schedule(ops.convert_to_tensor(iterations)))
    figure, axis = plt.subplots(figsize=(6, 3.5))
    axis.plot(iterations + 1, rates)
    axis.set_xlabel("step_num")
    axis.set_ylabel("learning rate")
    axis.set_title(type(schedule).__name__)
    return figure


def plot_training_curves(run_dir):
    """Loss and masked accuracy per epoch from `run_dir/history.csv`."""
    path = os.path.join(run_dir, "history.csv")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"No history.csv in {run_dir!r}: is it a training run directory?")
    with open(path) as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise ValueError(f"{path} has no epochs yet.")
    plt = _pyplot()
    epochs = [int(row["epoch"]) + 1 for row in rows]
    figure, axes = plt.subplots(1, 2, figsize=(10, 3.5))
    for axis, metric in zip(axes, ("loss", "masked_accuracy")):
        for prefix, label in (("", "train"), ("val_", "validation")):
            if prefix + metric in rows[0]:
                axis.plot(epochs, [float(row[prefix + metric]) for row in rows],
                          marker="o", label=label)
        axis.set_xlabel("epoch")
        axis.set_title(metric)
        axis.legend()
    figure.tight_layout()
    return figure
