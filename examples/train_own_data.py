"""Train a translator on your own parallel text, from the command line, with
the Python API (the `keras-transformer train` command does the same).

    # source<TAB>target lines (Tatoeba / Anki export), any of .gz .xz .bz2
    python examples/train_own_data.py pairs.tsv --minutes 30
    # Moses-style line-aligned files: data/train.en + data/train.de
    python examples/train_own_data.py data/train --source en --target de
    # then
    echo "How are you?" | keras-transformer translate runs/own

Pick the backend with KERAS_BACKEND (torch, jax or tensorflow) before
running. The run directory gets checkpoints (resume with --resume),
TensorBoard logs, history.csv, the final model.keras and tokenizer.model.
"""

import argparse

from keras_transformer import Translator
from keras_transformer.freed_memory import keep_freed_memory
from keras_transformer.training import TrainConfig, train


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", help="a TSV/JSONL file or a Moses prefix")
    parser.add_argument("--source", default="en", help="source language (Moses suffix)")
    parser.add_argument("--target", default="fr", help="target language (Moses suffix)")
    parser.add_argument("--preset", default=TrainConfig.preset, help="tiny, mini, small, base, big, ...")
    parser.add_argument("--minutes", type=float, default=TrainConfig.max_minutes,
                        help="training time budget")
    parser.add_argument("--run-dir", default="runs/own")
    parser.add_argument("--resume", action="store_true")
    args = parser.parse_args(argv)

    config = TrainConfig(
        corpus=args.corpus, source_language=args.source, target_language=args.target,
        preset=args.preset, max_minutes=args.minutes, run_dir=args.run_dir,
        resume=args.resume,
    )
    results = train(config)  # prints BLEU / chrF on a held-out test split
    print(f"BLEU {results['bleu']:.1f} after {results['steps']} steps")

    translator = Translator.load(args.run_dir)
    while True:
        try:
            line = input(f"{args.source}> ")
        except EOFError:
            break
        print(f"{args.target}: {translator.translate([line])[0]}")


if __name__ == "__main__":
    keep_freed_memory()  # before the first computation: faster steps on JAX and PyTorch
    main()
