"""The command line: `keras-transformer train | translate | average`.

    keras-transformer train                       # the embedded EN-FR corpus
    keras-transformer train --corpus my.tsv.gz --run-dir runs/mine
    keras-transformer train --run-dir runs/mine --resume
    echo "Hello." | keras-transformer translate runs/mine
    keras-transformer average runs/mine/checkpoints --last 5 -o avg.keras
"""

import argparse
import dataclasses
import sys


def _jit_compile(value):
    choices = {"auto": "auto", "true": True, "false": False}
    if value.lower() not in choices:
        raise argparse.ArgumentTypeError(f"expected auto, true or false; got {value!r}")
    return choices[value.lower()]


def _alpha(value):
    if value == "auto":
        return value
    try:
        return float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected auto or a number; got {value!r}") from None


def _add_train_arguments(parser):
    from keras_transformer.training.train import TrainConfig

    for field in dataclasses.fields(TrainConfig):
        flag = "--" + field.name.replace("_", "-")
        if field.type is bool or isinstance(field.default, bool):
            parser.add_argument(flag, action="store_true", help=f"(default: {field.default})")
        else:
            kind = type(field.default) if field.default is not None else str
            if field.name == "dropout_rate":
                kind = float
            if field.name == "jit_compile":
                kind = _jit_compile
            if field.name == "alpha":
                kind = _alpha
            parser.add_argument(flag, type=kind, default=field.default,
                                help=f"(default: {field.default})")


def _train(args):
    from keras_transformer.training.train import TrainConfig, train

    names = {f.name for f in dataclasses.fields(TrainConfig)}
    config = TrainConfig(**{k: v for k, v in vars(args).items() if k in names})
    try:
        train(config)
    except KeyboardInterrupt:
        print(f"\nInterrupted. Checkpoints are in {config.run_dir}/checkpoints; "
              f"continue with: keras-transformer train --run-dir {config.run_dir} "
              "--resume (and the same options).", file=sys.stderr)
        return 130
    return 0


def _translate(args):
    from keras_transformer.compilation_cache import enable_compilation_cache
    from keras_transformer.translator import Translator

    enable_compilation_cache()  # the beam search's programs, from an earlier run
    # The run directory's saved settings (a tuned alpha), unless given here.
    overrides = {name: getattr(args, name) for name in ("beam_size", "alpha")
                 if getattr(args, name) is not None}
    translator = Translator.load(args.run_dir, batch_size=args.batch_size, **overrides)
    stream = open(args.input, encoding="utf-8") if args.input else sys.stdin
    with stream:
        lines = [line.rstrip("\n") for line in stream]
    for translation in translator.translate(lines):
        print(translation)
    return 0


def _average(args):
    from keras_transformer.training.checkpoints import average_checkpoints, list_checkpoints

    paths = [p for _, p in list_checkpoints(args.checkpoint_dir)][-args.last:]
    if not paths:
        print(f"No ckpt-*.keras checkpoints in {args.checkpoint_dir!r}", file=sys.stderr)
        return 2
    average_checkpoints(paths).save(args.output)
    print(f"averaged {len(paths)} checkpoints into {args.output}")
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="keras-transformer", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    train = commands.add_parser("train", help="train a translator (the paper's recipe)")
    _add_train_arguments(train)
    translate = commands.add_parser("translate", help="translate stdin or a file")
    translate.add_argument("run_dir", help="a directory with model.keras and tokenizer.model")
    translate.add_argument("--input", help="a file of sentences (default: stdin)")
    translate.add_argument("--beam-size", type=int,
                           help="(default: the run's, else 4)")
    translate.add_argument("--alpha", type=float,
                           help="(default: the run's, else 0.6)")
    translate.add_argument("--batch-size", type=int, default=64)
    average = commands.add_parser("average", help="average the last checkpoints")
    average.add_argument("checkpoint_dir")
    average.add_argument("--last", type=int, default=5)
    average.add_argument("-o", "--output", required=True)
    args = parser.parse_args(argv)
    handler = {"train": _train, "translate": _translate, "average": _average}[args.command]
    return handler(args)


if __name__ == "__main__":
    sys.exit(main())
