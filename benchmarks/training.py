"""Training throughput side by side: our `Transformer` against an
identically sized keras-hub stack on the same backend, and against
PyTorch's native `nn.Transformer`; model FLOPs utilisation of each round
against a matrix-multiplication peak read just before and after it (the
machine's speed swings within minutes); first-step compile time;
mixed_bfloat16 against float32.

The reference configuration (`REFERENCE`): the `small` preset's sizes
(d_model 256, 4 heads, d_ff 1024, 3 encoder and 3 decoder layers,
vocabulary 8000, dropout 0.1), batches of 32 x 64 source and 64 target
tokens, Adam, label-smoothed cross-entropy, on the path Keras takes by
default (`jit_compile="auto"`: XLA on JAX, graph mode on a CPU-only
TensorFlow, eager PyTorch; `jit_compile=True` for XLA on TensorFlow).
Ours trains with the Adam `transformer_adam` returns (on PyTorch, one
fused update kernel), and again with `train`'s default, Muon for the
hidden layers' matrices, to time what that costs. keras-hub is trained
as its users write it, with Keras's
`SparseCategoricalCrossentropy(ignore_class=0)` and Adam, and again
with our loss and Adam, which compares the models alone.
Every side trains on the same batches (random tokens, random lengths, so
about a quarter of each batch is padding) and throughput counts real
(non-padding) target tokens. Keras models are timed inside `fit`, from a
tf.data pipeline, as `train` trains (`benchmarks.timing.fit_steps`).

Parameter counts differ by design and are printed: ours shares one
embedding between source, target and the output projection (section 3.4)
and has sinusoidal positions (no weights); the keras-hub stack has a
source and a target `TokenAndPositionEmbedding` (learned positions) and an
untied output `Dense`; `nn.Transformer` adds a final LayerNorm to each
stack. The output projection costs the same FLOPs either way.
"""

import math
import statistics
import time

import keras
import numpy as np

import keras_transformer as kt
from keras_transformer.cli import _value_parser
from keras_transformer.layers.position_wise_dense import position_wise_matmul
from keras_transformer.losses import LabelSmoothedCrossEntropy
from keras_transformer.training.options import JitCompile
from keras_transformer.training.runs import resolve_jit_compile

from benchmarks.timing import compare, compiled, fit_steps, timed

SIZES = ("d_model", "num_heads", "d_ff", "num_layers", "vocabulary_size",
         "dropout_rate")


def preset_sizes(preset, **overrides):
    """The model sizes every side of the comparison is built with."""
    config = kt.PRESETS[preset]["config"]
    return {**{name: config[name] for name in SIZES}, **overrides}


REFERENCE = dict(preset_sizes("small"), batch=32, length=64)
# Adam as the paper's, at a constant rate: the schedule is not what is timed.
ADAM = dict(learning_rate=1e-4, beta_1=0.9, beta_2=0.98, epsilon=1e-9)
# `train`'s default, Muon for the hidden matrices with that Adam for the rest.
MUON = dict(learning_rate=1e-4, adam_beta_1=0.9, adam_beta_2=0.98, epsilon=1e-9)


def step_path(backend, jit_compile):
    """How a step ran: "XLA", "torch.compile" (`jit_compile=True` on
    PyTorch), "graph mode" or "eager"."""
    if jit_compile:
        return "torch.compile" if backend == "torch" else "XLA"
    return "graph mode" if backend == "tensorflow" else "eager"


def add_jit_compile_argument(parser, help):
    """`--jit-compile auto|true|false`, parsed as `train` parses it."""
    parser.add_argument("--jit-compile", default="auto",
                        type=_value_parser(JitCompile), help=help)


def make_batches(count, batch, length, vocabulary_size, seed=0):
    """`count` teacher-forcing batches `(encoder_ids, decoder_ids, labels)`
    of int32 `(batch, length)`, each row of random length in
    `[length // 2, length]`, padded with 0."""
    rng = np.random.default_rng(seed)
    batches = []
    for _ in range(count):
        ids = rng.integers(4, vocabulary_size, (3, batch, length)).astype("int32")
        lengths = rng.integers(length // 2, length + 1, (2, batch))
        positions = np.arange(length)
        source = np.where(positions < lengths[0][:, None], ids[0], 0)
        target = np.where(positions < lengths[1][:, None], ids[1], 0)
        decoder = np.concatenate([np.ones((batch, 1), "int32"), target[:, :-1]], 1)
        decoder = np.where(target > 0, decoder, 0)
        batches.append((source, decoder, target))
    return batches


def real_target_tokens(batches):
    return int(sum(np.count_nonzero(labels) for _, _, labels in batches))


def parameter_counts(d_model, d_ff, num_layers, vocabulary_size, **_):
    """Our `Transformer`'s weights by part, from the dimensions alone.

    encoder layer: Q, K, V, O projections with biases, two-layer FFN, two
    LayerNorms; decoder layer: the same plus a cross-attention and a third
    LayerNorm; one embedding matrix, shared with the output projection.
    """
    attention = 4 * (d_model * d_model + d_model)
    feed_forward = 2 * d_model * d_ff + d_ff + d_model
    norm = 2 * d_model
    encoder = num_layers * (attention + feed_forward + 2 * norm)
    decoder = num_layers * (2 * attention + feed_forward + 3 * norm)
    return {"encoder": encoder, "decoder": decoder,
            "embedding": vocabulary_size * d_model}


def training_flops(d_model, d_ff, num_layers, vocabulary_size, batch, length, **_):
    """FLOPs of one training step (forward + backward = 3 x forward) on a
    `(batch, length)` source and target, counting every position computed
    (padding included: the hardware does that work).

        6 x (encoder weights x source tokens
             + (decoder weights + output projection V x d_model) x target tokens)
      + 3 x 4 x d_model x batch x num_layers x (S^2 + T^2 + T x S)

    The first term is 2 FLOPs per multiply-add per weight, times 3; the
    input embedding lookup is a gather (no FLOPs). The second is the
    attention matmuls, Q K^T and weights x V (2 x 2 x d_model FLOPs per
    query-key pair), forward and backward, for encoder self-attention
    (S^2), decoder self-attention (T^2, the masked half included: it is
    computed) and cross-attention (T x S). Biases, LayerNorm, softmax and
    dropout are left out, as in the usual 6N rule.
    """
    counts = parameter_counts(d_model, d_ff, num_layers, vocabulary_size)
    tokens = batch * length  # S = T = length
    weights = 6 * (counts["encoder"] * tokens
                   + (counts["decoder"] + counts["embedding"]) * tokens)
    attention = 3 * 4 * d_model * batch * num_layers * 3 * length * length
    return weights + attention


def our_model(config, dtype=None):
    """Our `Transformer` at `config`'s sizes; `dtype` a Keras dtype policy."""
    return kt.Transformer(
        vocabulary_size=config["vocabulary_size"], num_layers=config["num_layers"],
        d_model=config["d_model"], num_heads=config["num_heads"], d_ff=config["d_ff"],
        dropout_rate=config["dropout_rate"], max_length=config["length"], dtype=dtype)


def keras_hub_model(config):
    """The same sizes from keras-hub's layers: `TokenAndPositionEmbedding`
    + `TransformerEncoder` x N + `TransformerDecoder` x N + `Dense`,
    post-norm as the paper (keras-hub's default)."""
    import keras_hub

    d, length = config["d_model"], config["length"]
    layer = dict(intermediate_dim=config["d_ff"], num_heads=config["num_heads"],
                 dropout=config["dropout_rate"], layer_norm_epsilon=1e-6)
    encoder_ids = keras.Input((None,), dtype="int32", name="encoder_token_ids")
    decoder_ids = keras.Input((None,), dtype="int32", name="decoder_token_ids")
    x = keras_hub.layers.TokenAndPositionEmbedding(
        config["vocabulary_size"], length, d, mask_zero=True)(encoder_ids)
    for _ in range(config["num_layers"]):
        x = keras_hub.layers.TransformerEncoder(**layer)(x)
    y = keras_hub.layers.TokenAndPositionEmbedding(
        config["vocabulary_size"], length, d, mask_zero=True)(decoder_ids)
    for _ in range(config["num_layers"]):
        y = keras_hub.layers.TransformerDecoder(**layer)(y, x)
    logits = keras.layers.Dense(config["vocabulary_size"])(y)
    return keras.Model({"encoder_token_ids": encoder_ids,
                        "decoder_token_ids": decoder_ids}, logits)


def keras_hub_loss():
    """The loss keras-hub's users train its models with: no label
    smoothing, padding ignored."""
    return keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0)


def keras_trainer(model, jit_compile, loss=None, optimizer=None):
    """A callable that trains `model` on a list of batches in one `fit`
    call and returns `(seconds, loss)` (`fit_steps`). `loss` defaults to
    ours, label-smoothed (0.1); `optimizer` to our Adam (the one
    `transformer_adam` returns: a fused update on PyTorch)."""
    model.compile(optimizer=optimizer or kt.optimizers.Adam(**ADAM),
                  loss=loss or LabelSmoothedCrossEntropy(0.1), jit_compile=jit_compile)

    def run(batches):
        return fit_steps(model, [({"encoder_token_ids": source, "decoder_token_ids": decoder},
                                  labels) for source, decoder, labels in batches])

    run.model = model
    return run


def torch_native_trainer(config):
    """PyTorch's own `nn.Transformer` of the same size, trained in plain
    PyTorch: shared scaled embedding + sinusoidal positions + dropout,
    `nn.Transformer` (post-norm), tied output projection, the same
    label-smoothed loss (`F.cross_entropy(label_smoothing=0.1,
    ignore_index=0)`) and Adam. Threads as Keras' PyTorch backend uses.
    Returns `(seconds, loss)` as `keras_trainer`: from the end of the first
    step to the end of the last, and the last step's loss."""
    import torch

    d, length = config["d_model"], config["length"]

    class NativeTransformer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = torch.nn.Embedding(config["vocabulary_size"], d, padding_idx=0)
            position = np.arange(length)[:, None] / 10000 ** (np.arange(0, d, 2) / d)
            table = np.zeros((length, d), "float32")
            table[:, 0::2], table[:, 1::2] = np.sin(position), np.cos(position)
            self.register_buffer("positions", torch.from_numpy(table))
            self.dropout = torch.nn.Dropout(config["dropout_rate"])
            self.transformer = torch.nn.Transformer(
                d, config["num_heads"], config["num_layers"], config["num_layers"],
                config["d_ff"], config["dropout_rate"], batch_first=True)

        def embed(self, ids):
            return self.dropout(self.embedding(ids) * math.sqrt(d)
                                + self.positions[: ids.shape[1]])

        def forward(self, source, decoder):
            steps = decoder.shape[1]
            causal = torch.ones(steps, steps, dtype=torch.bool).triu(1)  # True = masked
            hidden = self.transformer(
                self.embed(source), self.embed(decoder), tgt_mask=causal, tgt_is_causal=True,
                src_key_padding_mask=source == 0, tgt_key_padding_mask=decoder == 0,
                memory_key_padding_mask=source == 0)
            return hidden @ self.embedding.weight.T  # (batch, T, V), tied

    model = NativeTransformer()
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=ADAM["learning_rate"],
                                 betas=(ADAM["beta_1"], ADAM["beta_2"]), eps=ADAM["epsilon"])

    def run(batches):
        step_ends = []
        for source, decoder, labels in batches:
            source, decoder, labels = (torch.from_numpy(x) for x in (source, decoder, labels))
            logits = model(source.long(), decoder.long())
            loss = torch.nn.functional.cross_entropy(
                logits.reshape(-1, logits.shape[-1]), labels.long().reshape(-1),
                ignore_index=0, label_smoothing=0.1)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            step_ends.append(time.perf_counter())  # eager on a CPU: the step is done
        return step_ends[-1] - step_ends[0], loss.detach().numpy()

    run.parameters = sum(p.numel() for p in model.parameters())
    return run


def matmul_peak_reader(n=2048, repeats=5):
    """A function returning the float32 FLOP/s of the fastest way this
    backend multiplies two `n x n` matrices on this machine, each time it
    is called: the best of `repeats` compiled products (compiled once, here).
    On PyTorch, the better of `ops.matmul` (MKL) and `position_wise_matmul`
    (on the CPU a 1 x 1 convolution, in oneDNN), the two ways our model
    multiplies there."""
    a = keras.random.normal((n, n), seed=0)
    b = keras.random.normal((n, n), seed=1)
    if keras.backend.backend() == "torch":
        products = [keras.ops.matmul, position_wise_matmul]
    else:
        products = [compiled(lambda x, y: x @ y)]
    for product in products:
        keras.ops.convert_to_numpy(product(a, b))

    def read():
        return 2 * n ** 3 / min(timed(product, a, b)
                                for product in products for _ in range(repeats))
    return read


def utilisation(flops, steps, times, peaks):
    """Model FLOPs utilisation of each round of `steps` steps: the FLOPs
    over the round's seconds and over the matmul peak read beside it
    (`compare`'s `peak`); the median, min and max over rounds."""
    rounds = [flops * steps / seconds / peak for seconds, peak in zip(times, peaks)]
    return {"median": statistics.median(rounds), "min": min(rounds), "max": max(rounds)}


def run(config=None, steps=8, rounds=3, native_torch=True, bfloat16_steps=20,
        jit_compile="auto"):
    """Every training comparison on the current backend; returns a dict
    (see `benchmarks.__main__` for the table). `jit_compile` as
    `model.compile` and `train` take it; "auto" is the package's default
    path. With `native_torch`, ours on this backend also runs against
    `nn.Transformer` in plain PyTorch, in the same process, alternating
    (PyTorch runs eagerly on the same cores whichever Keras backend is
    loaded). Each round times `steps` steps inside one `fit` call, after
    a first, untimed one (`fit_steps`)."""
    config = dict(REFERENCE, **(config or {}))
    batches = make_batches(steps + 1, config["batch"], config["length"],
                           config["vocabulary_size"])
    tokens = real_target_tokens(batches[1:])
    jit = resolve_jit_compile(jit_compile)
    # A short reading (3 products, about 0.1-0.5 s) beside every round.
    read_peak = matmul_peak_reader(repeats=3)

    keras.utils.set_random_seed(0)
    ours_step = keras_trainer(our_model(config), jit)
    hubs = {}
    # keras-hub as its users train it (its loss, Keras's Adam), and with
    # our loss and Adam, which compares the models alone.
    for name, loss, optimizer in (
            ("keras_hub", keras_hub_loss(), keras.optimizers.Adam(**ADAM)),
            ("keras_hub_same_loss", None, None)):
        keras.utils.set_random_seed(0)
        hubs[name] = keras_trainer(keras_hub_model(config), jit, loss, optimizer)
    # Ours again with `train`'s default optimizer: what its step costs.
    keras.utils.set_random_seed(0)
    muon_step = keras_trainer(our_model(config), jit, optimizer=kt.optimizers.Muon(**MUON))

    # First step: trace + compile + a one-step `fit`, minus a warm one.
    first = timed(ours_step, batches[:1])
    compile_s = first - timed(ours_step, batches[:1])

    result = {"backend": keras.backend.backend(), "config": config, "steps": steps,
              "target_tokens": tokens, "compile_s": compile_s, "jit_compile": jit,
              "parameters": {"ours": ours_step.model.count_params(),
                             "keras_hub": hubs["keras_hub"].model.count_params()},
              "tokens_per_s": {}}
    ours_times, ours_peaks = [], []
    for name, hub_step in hubs.items():
        result[f"ours_vs_{name}"] = compare(ours_step, hub_step, batches, rounds,
                                            self_timed=True, peak=read_peak)
        ours_times += result[f"ours_vs_{name}"]["a_times"]
        ours_peaks += result[f"ours_vs_{name}"]["a_peaks"]
        result["tokens_per_s"][name] = tokens / result[f"ours_vs_{name}"]["b_s"]

    result["ours_vs_ours_with_muon"] = compare(ours_step, muon_step, batches, rounds,
                                               self_timed=True, peak=read_peak)
    ours_times += result["ours_vs_ours_with_muon"]["a_times"]
    ours_peaks += result["ours_vs_ours_with_muon"]["a_peaks"]

    if native_torch:
        import torch

        torch.manual_seed(0)
        native = torch_native_trainer(config)
        result["parameters"]["torch_native"] = native.parameters
        result["ours_vs_torch_native"] = compare(ours_step, native, batches, rounds,
                                                 self_timed=True, peak=read_peak)
        ours_times += result["ours_vs_torch_native"]["a_times"]
        ours_peaks += result["ours_vs_torch_native"]["a_peaks"]
        result["tokens_per_s"]["torch_native"] = tokens / result["ours_vs_torch_native"]["b_s"]
        result["threads"] = torch.get_num_threads()

    # Ours: the median over every round it ran, in any comparison.
    step_s = statistics.median(ours_times) / steps
    result["tokens_per_s"]["ours"] = tokens / (step_s * steps)
    flops = training_flops(**config)
    # keras-hub's stack does the same matrix products (its learned positions
    # are a lookup), so the same count gives its utilisation, and 1 / it
    # bounds how much faster than it a model doing these products can step.
    hub = result["ours_vs_keras_hub"]
    result["mfu"] = {"flops_per_step": flops, "step_s": step_s,
                     "achieved_flops": flops / step_s,
                     "matmul_peak_flops": statistics.median(ours_peaks),
                     "utilisation": utilisation(flops, steps, ours_times, ours_peaks),
                     "keras_hub_utilisation": utilisation(flops, steps, hub["b_times"],
                                                          hub["b_peaks"])}
    if bfloat16_steps:
        # On a CPU-only TensorFlow's graph mode, oneDNN's kernels multiply
        # bfloat16 with AMX (or AVX-512 BF16) where XLA's do not.
        result["bfloat16"] = mixed_precision(config, bfloat16_steps, rounds, jit)
    return result


def mixed_precision(config, steps, rounds, jit):
    """Our model in mixed_bfloat16 against float32: step time (4 steps a
    round), and the mean loss of `steps` steps on the same batches from the
    same initial weights."""
    batches = make_batches(steps, config["batch"], config["length"],
                           config["vocabulary_size"], seed=1)
    trainers, losses = {}, {}
    for policy in ("float32", "mixed_bfloat16"):
        keras.utils.set_random_seed(0)
        trainers[policy] = keras_trainer(our_model(config, dtype=policy), jit)
    for policy, trainer in trainers.items():
        losses[policy] = float(trainer(batches)[1])  # also the warm-up
    timing = compare(trainers["float32"], trainers["mixed_bfloat16"], batches[:5], rounds,
                     self_timed=True)
    return {"float32_loss": losses["float32"], "bfloat16_loss": losses["mixed_bfloat16"],
            "speedup": 1.0 / timing["ratio_median"], "timing": timing, "jit_compile": jit}

