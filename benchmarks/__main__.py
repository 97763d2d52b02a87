"""`python -m benchmarks [--rounds N] [--small]`: prints a Markdown table.

Run once per backend (KERAS_BACKEND=...). Each comparison runs both sides in
the same process, alternating, after a compile/warm-up call, and reports the
median ratio with its min and max.
"""

import argparse

import keras

from benchmarks import decoding


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--small", action="store_true", help="a tiny configuration, for tests")
    args = parser.parse_args(argv)
    size = dict(d_model=32, num_layers=1, vocabulary_size=100, batch=2,
                source_length=4, max_extra_length=4) if args.small else {}
    r = decoding.run(rounds=args.rounds, **size)
    print(f"| benchmark ({keras.backend.backend()}) | A | B | B / A median (min-max) |")
    print("|---|---|---|---|")
    rows = [("cached_vs_uncached", "cached", "uncached"),
            ("ours_vs_keras_hub", "ours", "keras-hub BeamSampler")]
    for key, a, b in rows:
        c = r[key]
        print(f"| beam 4, output length {r['output_length']} | {a} {c['a_s']:.3f} s | "
              f"{b} {c['b_s']:.3f} s | {c['ratio_median']:.2f}x "
              f"({c['ratio_min']:.2f}-{c['ratio_max']:.2f}) |")
    print(f"\ncached beam search: {r['sentences_per_s']:.1f} sentences/s; "
          f"cached and uncached give the same output: {r['same_output']}")
    return r


if __name__ == "__main__":
    main()
