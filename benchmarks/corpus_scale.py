"""Cost against corpus size: `prepare` then `train` on synthetic corpora of
growing size, each program in its own process, measured from outside.

    python -m benchmarks.corpus_scale --pairs 100000 1000000 4500000

A corpus of N pairs is recombined from the shipped Bible corpus: each pair
joins one or two random verse pairs, so lengths and vocabulary stay those
of real text. For every size it reports `prepare`'s time, pairs/s and peak
memory, and `train`'s peak memory and time to its first step on the
prepared corpus (`--raw N` adds `train` on the raw files of at most N
pairs, which hold the corpus in memory). Prints a Markdown table;
`--json PATH` saves the rows.
"""

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time

from keras_transformer.data.corpora import bible_en_fr


def synthetic_corpus(path, pairs, seed=0):
    """Writes `pairs` TSV lines at `path`, each one or two random shipped
    verse pairs joined."""
    verses = bible_en_fr("train")
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(pairs):
            chosen = rng.sample(verses, rng.randint(1, 2))
            f.write(" ".join(s for s, _ in chosen) + "\t" + " ".join(t for _, t in chosen)
                    + "\n")


def run_measured(args):
    """Runs `keras-transformer ARGS` in a new process; returns `(seconds,
    peak resident memory in MiB)` of that process alone."""
    start = time.monotonic()
    process = subprocess.Popen([sys.executable, "-m", "keras_transformer", *args],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.monotonic() - start
    errors = process.stderr.read().decode(errors="replace")
    process.stderr.close()
    if status:
        raise RuntimeError(f"keras-transformer {' '.join(args)} failed:\n{errors[-3000:]}")
    return seconds, usage.ru_maxrss / 1024  # KiB on Linux


def measure(pairs, workdir, train_minutes=1.0, raw=0, vocabulary_size=8000):
    """One row per corpus size in `pairs` (a list of int); see the module
    docstring. `raw` is the largest size also trained on from its raw file.
    `train` runs the `mini` preset for `train_minutes`, then scores 10 test
    sentences greedily."""
    os.makedirs(workdir, exist_ok=True)
    rows = []
    for size in pairs:
        corpus = os.path.join(workdir, f"corpus-{size}.tsv")
        synthetic_corpus(corpus, size)
        prepared = os.path.join(workdir, f"prepared-{size}")
        seconds, memory = run_measured([
            "prepare", "--corpus", corpus, "--output-dir", prepared, "--quiet",
            "--vocabulary-size", str(vocabulary_size)])
        row = {"pairs": size, "prepare_s": seconds, "prepare_pairs_per_s": size / seconds,
               "prepare_peak_mib": memory}
        for kind, source in [("prepared", prepared)] + ([("raw", corpus)] if size <= raw else []):
            run_dir = os.path.join(workdir, f"run-{kind}-{size}")
            _, memory = run_measured([
                "train", "--corpus", source, "--run-dir", run_dir,
                "--max-minutes", str(train_minutes), "--eval-sentences", "10",
                "--alpha", "0.6", "--beam-size", "1"]
                + (["--vocabulary-size", str(vocabulary_size)] if kind == "raw" else []))
            with open(os.path.join(run_dir, "results.json")) as f:
                results = json.load(f)
            row[f"train_{kind}_peak_mib"] = results["training_peak_memory_mib"]
            row[f"train_{kind}_process_peak_mib"] = memory
            row[f"train_{kind}_first_step_s"] = results["seconds_to_first_step"]
            row[f"train_{kind}_steps"] = results["steps"]
        rows.append(row)
    return rows


def table(rows):
    raw = any("train_raw_peak_mib" in r for r in rows)
    lines = ["| pairs | prepare | pairs/s | prepare peak | train peak | first step |"
             + (" raw: train peak | raw: first step |" if raw else ""),
             "|---:|---:|---:|---:|---:|---:|" + ("---:|---:|" if raw else "")]
    for r in rows:
        line = (f"| {r['pairs']:,} | {r['prepare_s']:.0f} s | {r['prepare_pairs_per_s']:,.0f} "
                f"| {r['prepare_peak_mib']:,.0f} MiB | {r['train_prepared_peak_mib']:,.0f} MiB "
                f"| {r['train_prepared_first_step_s']:.1f} s |")
        if "train_raw_peak_mib" in r:
            line += (f" {r['train_raw_peak_mib']:,.0f} MiB | "
                     f"{r['train_raw_first_step_s']:.1f} s |")
        elif raw:
            line += " | |"
        lines.append(line)
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, nargs="+", default=[100_000, 1_000_000, 4_500_000])
    parser.add_argument("--train-minutes", type=float, default=1.0)
    parser.add_argument("--raw", type=int, default=0, metavar="N",
                        help="also train on the raw files of at most N pairs")
    parser.add_argument("--workdir", help="where corpora and runs go (default: a temporary one)")
    parser.add_argument("--json", help="save the rows here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as temporary:
        rows = measure(args.pairs, args.workdir or temporary, args.train_minutes, args.raw)
    print(table(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
