"""`python -m benchmarks [training|decoding|pipeline|language_models ...] [--rounds N]
[--small] [--jit-compile auto|true|false] [--readme docs/RESULTS.md]`: prints a Markdown table.

Run once per backend (KERAS_BACKEND=...). Each comparison runs both sides
in the same process, with the same threads, alternating, after a
compile/warm-up call, and reports the median ratio with its min and max.
`--readme PATH` also writes the tables into that Markdown file (the
project's is docs/RESULTS.md), between the lines
`<!-- benchmarks:BACKEND -->` and `<!-- /benchmarks:BACKEND -->` for the
translator's suites, and `<!-- benchmarks:BACKEND:language_models -->`
... for the language models'.
"""

import argparse
import importlib
import re
import warnings

import keras

from benchmarks import training
from benchmarks.training import add_jit_compile_argument, step_path
from keras_transformer.freed_memory import keep_freed_memory

SUITES = ("training", "decoding", "pipeline", "language_models")
SMALL = {
    "training": dict(config=dict(training.preset_sizes("tiny", num_layers=1, vocabulary_size=100),
                                 batch=4, length=8),
                     steps=2, bfloat16_steps=2),
    "decoding": dict(preset="tiny", num_layers=1, vocabulary_size=100, batch=2,
                     source_length=4, max_extra_length=4),
    "pipeline": dict(pairs=200, vocabulary_size=300),
    "language_models": dict(steps=2, batch=2, length=16, generate_batch=2, prompt_length=4,
                            max_length=12, lm_preset="gpt_tiny", encoder_preset="bert_tiny",
                            vocabulary_size=100, num_layers=1),
}


def _ratio(c):
    return f"{c['ratio_median']:.2f}x ({c['ratio_min']:.2f}-{c['ratio_max']:.2f})"


def _range(u):
    return f"{u['median']:.1%} ({u['min']:.1%}-{u['max']:.1%})"


def _row(what, a, b, c, unit="s"):
    return f"| {what} | {a} {c['a_s']:.3f} {unit} | {b} {c['b_s']:.3f} {unit} | {_ratio(c)} |"


def table(results):
    """The Markdown table of `results` (suite name -> its `run` result)."""
    backend = keras.backend.backend()
    lines = [f"| {backend} | A | B | B / A, median (min-max) |", "|---|---|---|---|"]
    notes = []
    if "training" in results:
        r = results["training"]
        steps, p = r["steps"], r["parameters"]
        what = (f"training ({step_path(r['backend'], r['jit_compile'])}), {steps} steps, "
                f"{r['target_tokens']} target tokens")
        lines.append(_row(what, "ours", "keras-hub, Keras's sparse cross-entropy",
                          r["ours_vs_keras_hub"]))
        lines.append(_row(what, "ours", "keras-hub, our loss and Adam",
                          r["ours_vs_keras_hub_same_loss"]))
        if "ours_vs_torch_native" in r:
            lines.append(_row(what, "ours", "torch nn.Transformer", r["ours_vs_torch_native"]))
        muon = r["ours_vs_ours_with_muon"]
        lines.append(_row(what, "ours", "ours with Muon, train's default", muon))
        b = r["bfloat16"]
        lines.append(_row("training, ours", "float32", "mixed_bfloat16", b["timing"]))
        tokens = ", ".join(f"{k} {v:,.0f}" for k, v in r["tokens_per_s"].items())
        m = r["mfu"]
        notes += [
            f"- training throughput (real target tokens/s): {tokens}",
            "- parameters: " + ", ".join(f"{k} {v:,}" for k, v in p.items()),
            f"- model FLOPs utilisation (ours): {_range(m['utilisation'])} over rounds, "
            f"each against the float32 matmul peak read beside it; "
            f"{m['flops_per_step'] / 1e9:.1f} GFLOP/step / {m['step_s']:.3f} s median step, "
            f"median peak {m['matmul_peak_flops'] / 1e9:.0f} GFLOP/s; "
            f"keras-hub's {_range(m['keras_hub_utilisation'])}",
            f"- ours with Muon against keras-hub, Keras's sparse cross-entropy: "
            f"{r['ours_vs_keras_hub']['b_s'] / muon['b_s']:.2f}x (median steps)",
            f"- first-step compile time (ours): {r['compile_s']:.1f} s",
            f"- mixed_bfloat16 ({step_path(r['backend'], b['jit_compile'])}): "
            f"{b['speedup']:.2f}x the float32 speed; mean loss over "
            f"the same steps {b['bfloat16_loss']:.3f} vs {b['float32_loss']:.3f} (float32)",
        ]
    if "decoding" in results:
        r = results["decoding"]
        what = f"beam 4, output length {r['output_length']}"
        lines.append(_row(what, "cached", "uncached", r["cached_vs_uncached"]))
        lines.append(_row(what, "ours", "keras-hub BeamSampler, our model",
                          r["ours_vs_keras_hub"]))
        lines.append(_row(what, "ours", "keras-hub BART + BeamSampler",
                          r["ours_vs_keras_hub_bart"]))
        notes.append(f"- cached beam search: {r['sentences_per_s']:.1f} sentences/s; "
                     f"cached and uncached give the same output: {r['same_output']}")
    if "pipeline" in results:
        r = results["pipeline"]
        lines.append(_row(f"fit, one epoch, {r['batches']} batches", "tf.data",
                          "in memory", r["tf_data_vs_memory"]))
        e = r["padding_efficiency"]
        notes.append(f"- padding efficiency (real tokens / slots): bucketed {e['bucketed']:.1%}, "
                     f"padded per random batch {e['per_batch']:.1%}, fixed length "
                     f"{e['fixed']:.1%}")
    if "language_models" in results:
        r = results["language_models"]
        what = (f"training ({step_path(backend, r['jit_compile'])}), {r['steps']} steps of "
                f"{r['batch']} x {r['length']}")
        lines.append(_row(f"CausalLM {what}", "ours", "keras-hub GPT2CausalLM",
                          r["causal_lm"]))
        lines.append(_row(f"MaskedLM {what}", "ours", "keras-hub BertMaskedLM",
                          r["masked_lm"]))
        lines.append(_row(f"generate, greedy, {r['generate_batch']} x "
                          f"{r['generate_length']} tokens", "ours",
                          "keras-hub GPT2CausalLM.generate", r["generate"]))
        notes.append("- parameters (ours, keras-hub): causal LM "
                     + ", ".join(f"{n:,}" for n in r["causal_lm_parameters"])
                     + "; masked LM " + ", ".join(f"{n:,}" for n in r["masked_lm_parameters"]))
    return "\n".join(lines + [""] + notes)


def write_readme(path, text, block):
    """Replaces the block between the lines `<!-- benchmarks:BLOCK -->` and
    `<!-- /benchmarks:BLOCK -->` in `path` by `text`."""
    start, end = f"<!-- benchmarks:{block} -->", f"<!-- /benchmarks:{block} -->"
    with open(path, encoding="utf-8") as f:
        readme = f.read()
    if start not in readme or end not in readme:
        raise ValueError(f"{path} has no {start} ... {end} block to write into.")
    readme = re.sub(re.escape(start) + ".*?" + re.escape(end),
                    lambda _: f"{start}\n{text}\n{end}", readme, flags=re.S)
    with open(path, "w", encoding="utf-8") as f:
        f.write(readme)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("suites", nargs="*", help=f"any of {', '.join(SUITES)} (default: all)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--small", action="store_true", help="a tiny configuration, for tests")
    add_jit_compile_argument(
        parser, 'the training suites\' path, as `model.compile` takes it: "auto" (the '
                "default path: graph mode on a CPU-only TensorFlow), true (XLA) or false")
    parser.add_argument("--readme", help="write the table into this Markdown file (docs/RESULTS.md)")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.suites) - set(SUITES))
    if unknown:
        parser.error(f"unknown benchmark {unknown[0]!r}; choose from {', '.join(SUITES)}")

    results = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # keras-hub's mask notices, torch's deprecations
        for suite in args.suites or SUITES:
            module = importlib.import_module(f"benchmarks.{suite}")
            options = dict(SMALL[suite] if args.small else {})
            if suite in ("training", "language_models"):
                options["jit_compile"] = args.jit_compile
            results[suite] = module.run(rounds=args.rounds, **options)
    # The translator's suites and the language models' have a table each.
    backend = keras.backend.backend()
    for block, suites in ((backend, set(SUITES) - {"language_models"}),
                          (f"{backend}:language_models", {"language_models"})):
        group = {k: v for k, v in results.items() if k in suites}
        if group:
            text = table(group)
            print(text)
            if args.readme:
                write_readme(args.readme, text, block)
    return results


if __name__ == "__main__":
    keep_freed_memory()  # as the package's programs run
    main()
