"""The paper-scale check of an accelerator, on the backend Keras loads:
the `base` preset's training step (as `train` runs it on a GPU: XLA on
TensorFlow and JAX, eager PyTorch; `--jit-compile` chooses another
path) in float32 and mixed_bfloat16, with its real target tokens a
second and its model FLOPs utilisation against the device's
matrix-multiplication peak measured in the same precision and the same
run; then cached beam search (beam 4, alpha 0.6, up to input + 50
tokens) in sentences a second.

    KERAS_BACKEND=jax python -m benchmarks.gpu               # base, 200 x 128 tokens
    KERAS_BACKEND=tensorflow python -m benchmarks.gpu --small  # tiny sizes, any CPU
    KERAS_BACKEND=torch python -m benchmarks.gpu --jit-compile true  # torch.compile

It runs on the device the backend chooses: a GPU where there is one. The
base preset's default batch, 200 rows of up to 128 tokens a side (about
19,000 real target tokens), is near the paper's 25,000 a step. Prints a
Markdown table; `--json PATH` saves the figures.
"""

import argparse
import json
import statistics
import time

import keras
import numpy as np

from benchmarks.training import (
    add_jit_compile_argument,
    keras_trainer,
    make_batches,
    our_model,
    preset_sizes,
    real_target_tokens,
    step_path,
    training_flops,
)
from benchmarks.timing import compiled, timed
from keras_transformer.decoding.beam_search import beam_search
from keras_transformer.training.runs import allow_tf32, has_accelerator, resolve_jit_compile

POLICIES = ("float32", "mixed_bfloat16")
SMALL = dict(config=dict(preset_sizes("tiny", num_layers=1, vocabulary_size=100),
                         batch=4, length=8),
             steps=2, matmul_size=256, beam_batch=2, source_length=4, max_extra_length=4)


def matmul_peak(dtype, n=8192, repeats=10):
    """FLOP/s of compiled `n x n` products in `dtype` (float32 or
    bfloat16) on the backend's device: `repeats` products queued, then one
    wait, so that neither launches nor copies to the host are timed (the
    sum of each product, one scalar, is what comes back)."""
    a = keras.random.normal((n, n), seed=0, dtype=dtype)
    b = keras.random.normal((n, n), seed=1, dtype=dtype)
    product = compiled(
        lambda x, y: keras.ops.cast(keras.ops.sum(keras.ops.matmul(x, y)), "float32"))
    keras.ops.convert_to_numpy(product(a, b))  # compile
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(repeats):
            out = product(a, b)
        keras.ops.convert_to_numpy(out)
        best = min(best, (time.perf_counter() - start) / repeats)
    return 2 * n ** 3 / best


def training_step(config, policy, steps, rounds, peak, jit_compile):
    """Our model at `config`'s sizes in the dtype `policy`, compiled with
    `jit_compile`, trained on `steps` timed batches per round in one `fit`
    call (after its untimed first step, `fit_steps`) once a first call has
    compiled; returns the median step time, real target tokens a second,
    FLOP/s, utilisation of `peak` and the mean loss of the last round."""
    batches = make_batches(steps + 1, config["batch"], config["length"],
                           config["vocabulary_size"])
    keras.utils.set_random_seed(0)
    model = our_model(config, dtype=policy)
    step = keras_trainer(model, jit_compile=jit_compile)
    step(batches[:1])  # compile
    times = []
    for _ in range(rounds):
        seconds, loss = step(batches)
        times.append(seconds / steps)
    step_s = statistics.median(times)
    flops = training_flops(**config)
    return {"step_s": step_s, "step_s_min": min(times), "step_s_max": max(times),
            "tokens_per_s": real_target_tokens(batches[1:]) / steps / step_s,
            "flops_per_step": flops, "achieved_flops": flops / step_s,
            "peak_flops": peak, "utilisation": flops / step_s / peak, "loss": float(loss),
            "parameters": model.count_params()}


def beam_search_speed(config, batch, source_length, max_extra_length, rounds):
    """Cached beam search (beam 4, alpha 0.6) of an untrained float32 model
    at `config`'s sizes on `batch` random sources of `source_length`
    tokens: every hypothesis runs to the length limit, so each sentence
    decodes `source_length + max_extra_length` steps."""
    keras.utils.set_random_seed(0)
    model = our_model(dict(config, length=source_length + max_extra_length))
    rng = np.random.default_rng(0)
    source = rng.integers(4, config["vocabulary_size"], (batch, source_length)).astype("int32")

    def search():
        tokens, _ = beam_search(model, source, beam_size=4, alpha=0.6,
                                max_extra_length=max_extra_length)
        return keras.ops.convert_to_numpy(tokens)

    tokens = search()  # compile
    times = [timed(search) for _ in range(rounds)]
    seconds = statistics.median(times)
    return {"batch": batch, "output_shape": list(tokens.shape), "seconds": seconds,
            "seconds_min": min(times), "seconds_max": max(times),
            "sentences_per_s": batch / seconds}


def run(config=None, steps=10, rounds=3, matmul_size=8192, beam_batch=64, source_length=32,
        max_extra_length=50, jit_compile="auto"):
    """Every figure of the module docstring on the current backend; the
    model is the `base` preset at 200 x 128 tokens unless `config` (sizes
    as `benchmarks.training.REFERENCE`) says otherwise. `jit_compile` as
    `train` takes it ("auto": its choice for the device at hand)."""
    config = {**preset_sizes("base"), "batch": 200, "length": 128, **(config or {})}
    allow_tf32()  # float32 as `train` runs it
    jit = resolve_jit_compile(jit_compile)
    result = {"backend": keras.backend.backend(), "accelerator": has_accelerator(),
              "devices": _devices(), "config": config, "steps": steps, "rounds": rounds,
              "jit_compile": jit}
    for policy in POLICIES:
        dtype = "float32" if policy == "float32" else "bfloat16"
        peak = matmul_peak(dtype, matmul_size)
        result[policy] = training_step(config, policy, steps, rounds, peak, jit)
    result["beam_search"] = beam_search_speed(config, beam_batch, source_length,
                                              max_extra_length, rounds)
    return result


def _devices():
    if keras.backend.backend() == "torch":
        import torch

        return [torch.cuda.get_device_name(0)] if torch.cuda.is_available() else ["cpu"]
    return keras.distribution.list_devices()


def table(result):
    c = result["config"]
    path = step_path(result["backend"], result["jit_compile"])
    lines = [f"{result['backend']} ({path}) on {', '.join(result['devices'])}: "
             f"d_model {c['d_model']}, "
             f"{c['num_layers']}+{c['num_layers']} layers, vocabulary {c['vocabulary_size']:,}, "
             f"batch {c['batch']} x {c['length']}, {result[POLICIES[0]]['parameters']:,} weights",
             "",
             "| precision | step (min-max) | target tokens/s | TFLOP/s | matmul peak | MFU |",
             "|---|---:|---:|---:|---:|---:|"]
    for policy in POLICIES:
        r = result[policy]
        lines.append(f"| {policy} | {r['step_s'] * 1e3:.1f} ms ({r['step_s_min'] * 1e3:.1f}-"
                     f"{r['step_s_max'] * 1e3:.1f}) | {r['tokens_per_s']:,.0f} | "
                     f"{r['achieved_flops'] / 1e12:.2f} | {r['peak_flops'] / 1e12:.2f} | "
                     f"{r['utilisation']:.0%} |")
    b = result["beam_search"]
    lines += ["", f"cached beam search, beam 4, {b['batch']} sentences to "
              f"{b['output_shape'][-1]} tokens: {b['seconds'] * 1e3:,.0f} ms "
              f"({b['seconds_min'] * 1e3:,.0f}-{b['seconds_max'] * 1e3:,.0f}), "
              f"{b['sentences_per_s']:,.1f} sentences/s"]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", action="store_true", help="tiny sizes, for a CPU or a test")
    parser.add_argument("--rounds", type=int, default=3)
    add_jit_compile_argument(
        parser, 'the training step\'s path: "auto" (as `train` runs it), true (XLA; '
                "torch.compile on PyTorch) or false")
    parser.add_argument("--json", help="save the figures here")
    args = parser.parse_args(argv)
    result = run(rounds=args.rounds, jit_compile=args.jit_compile,
                 **(SMALL if args.small else {}))
    print(table(result))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return result


if __name__ == "__main__":
    main()
