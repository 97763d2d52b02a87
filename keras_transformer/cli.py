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
import types
import typing


def _value_parser(annotation):
    """A parser of flag values for a field of type `annotation`: `str`,
    `int`, `float`, `bool` ("true"/"false"), `Literal[...]` and unions of
    them (`X | None` is `X`, its default None)."""
    members = typing.get_args(annotation) if isinstance(
        annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union else (
        annotation,)
    literals = [value for member in members if typing.get_origin(member) is typing.Literal
                for value in typing.get_args(member)]
    kinds = [member for member in members
             if member is not type(None) and typing.get_origin(member) is not typing.Literal]
    names = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}
    allowed = " or ".join([str(value) for value in literals] + [names[k] for k in kinds])

    def parse(text):
        if text in literals:
            return text
        for kind in kinds:
            if kind is bool and text.lower() in ("true", "false"):
                return text.lower() == "true"
            if kind in (int, float, str):
                try:
                    return kind(text)
                except ValueError:
                    pass
        raise argparse.ArgumentTypeError(f"expected {allowed}; got {text!r}")

    return parse


def _add_train_arguments(parser):
    from keras_transformer.training.train import TrainConfig

    annotations = typing.get_type_hints(TrainConfig)
    for field in dataclasses.fields(TrainConfig):
        flag = "--" + field.name.replace("_", "-")
        annotation = annotations[field.name]
        if annotation is bool:
            parser.add_argument(flag, action="store_true", help=f"(default: {field.default})")
        else:
            parser.add_argument(flag, type=_value_parser(annotation), default=field.default,
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
