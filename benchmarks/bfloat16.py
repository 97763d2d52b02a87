"""Whether this CPU multiplies bfloat16 faster than float32: the smallest
reproduction behind mixed_bfloat16's speed in `benchmarks.training`.

    KERAS_BACKEND=jax python -m benchmarks.bfloat16

One compiled `n x n` product (`jax.jit`, XLA on TensorFlow, eager on
PyTorch) in each dtype, alternating, after a warm-up call each; on
TensorFlow also in graph mode. A training step in mixed_bfloat16 can
only gain where this product does: x86 CPUs multiply bfloat16 natively
with the AVX-512 BF16 or AMX instructions, which the script reports from
`/proc/cpuinfo`; without them a backend converts to float32 and
multiplies there.
"""

import argparse

import keras
import numpy as np

from benchmarks.timing import compare, compiled

BF16_FLAGS = ("avx512_bf16", "amx_bf16", "avx512f", "avx2")


def cpu_flags(path="/proc/cpuinfo"):
    """`{flag: present}` for `BF16_FLAGS`; None where the file is not there
    (not Linux)."""
    try:
        with open(path) as f:
            line = next((l for l in f if l.startswith("flags")), "")
    except OSError:
        return None
    present = set(line.split(":", 1)[-1].split())
    return {flag: flag in present for flag in BF16_FLAGS}


def _compare_dtypes(product, a, b, rounds):
    """`product` of `a` and `b` in float32 against bfloat16: seconds, the
    speedup (float32 / bfloat16: above 1, bfloat16 is faster) and its min
    and max, and the largest difference between the two products,
    relative to the float32 product's largest entry."""
    inputs = {dtype: (keras.ops.cast(a, dtype), keras.ops.cast(b, dtype))
              for dtype in ("float32", "bfloat16")}
    timing = compare(lambda _: product(*inputs["float32"]),
                     lambda _: product(*inputs["bfloat16"]), None, rounds)
    exact = keras.ops.convert_to_numpy(product(*inputs["float32"]))
    rounded = keras.ops.convert_to_numpy(
        keras.ops.cast(product(*inputs["bfloat16"]), "float32"))
    return {"float32_s": timing["a_s"], "bfloat16_s": timing["b_s"],
            "bfloat16_speedup": 1.0 / timing["ratio_median"],
            "speedup_min": 1.0 / timing["ratio_max"], "speedup_max": 1.0 / timing["ratio_min"],
            "relative_difference": float(np.abs(rounded - exact).max() / np.abs(exact).max())}


def run(n=2048, rounds=5):
    """One `n x n` product compiled as a training step is (see
    `_compare_dtypes` for the figures), the CPU's flags, and on TensorFlow
    also in graph mode (`graph_mode`), Keras's default on a CPU: there
    oneDNN multiplies bfloat16 with AMX where XLA does not
    (docs/RESULTS.md)."""
    a = keras.random.normal((n, n), seed=0)
    b = keras.random.normal((n, n), seed=1)
    result = {"backend": keras.backend.backend(), "n": n,
              **_compare_dtypes(compiled(keras.ops.matmul), a, b, rounds),
              "cpu_flags": cpu_flags()}
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        result["graph_mode"] = _compare_dtypes(tf.function(keras.ops.matmul), a, b, rounds)
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2048)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    r = run(args.n, args.rounds)
    flags = r["cpu_flags"]
    for path, t in [("compiled", r), ("graph mode", r.get("graph_mode"))]:
        if t:
            print(f"{r['backend']} ({path}): {r['n']} x {r['n']} product, float32 "
                  f"{t['float32_s'] * 1e3:.1f} ms, bfloat16 {t['bfloat16_s'] * 1e3:.1f} ms: "
                  f"bfloat16 at {t['bfloat16_speedup']:.2f}x ({t['speedup_min']:.2f}-"
                  f"{t['speedup_max']:.2f}) the float32 speed")
    print("CPU flags: " + (", ".join(f"{k} {'yes' if v else 'no'}" for k, v in flags.items())
                           if flags else "unknown"))
    return r


if __name__ == "__main__":
    main()
