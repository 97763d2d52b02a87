"""The command line: `keras-transformer prepare | train | translate |
average`, and the language models' `train-lm | generate | pretrain-mlm |
finetune`.

    keras-transformer train                       # the shipped EN-FR corpus
    keras-transformer train --corpus my.tsv.gz --run-dir runs/mine
    keras-transformer prepare --corpus big.tsv.gz --output-dir data/big
    keras-transformer train --corpus data/big --run-dir runs/big
    keras-transformer train --run-dir runs/mine --resume
    keras-transformer train --recipe paper-base --corpus data/wmt14
    echo "Hello." | keras-transformer translate runs/mine
    keras-transformer average runs/mine/checkpoints --last 5 -o avg.keras
    keras-transformer train-lm --corpus text:books.txt --run-dir runs/gpt
    echo "Once upon" | keras-transformer generate runs/gpt
    keras-transformer pretrain-mlm --run-dir runs/bert
    keras-transformer finetune --pretrained runs/bert --run-dir runs/pairs
    keras-transformer finetune --corpus labelled:reviews.tsv --pretrained runs/bert
"""

import argparse
import dataclasses
import os
import sys
import types
import typing
import warnings


PROG = "keras-transformer"
KINDS = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}


class Parser(argparse.ArgumentParser):
    """argparse, with errors as one line: `keras-transformer: error: ...`."""

    def error(self, message):
        self.exit(2, f"{PROG}: error: {message}\n")


def _value_parser(annotation, check=None):
    """A parser of flag values for a field of type `annotation`: `str`,
    `int`, `float`, `bool` ("true"/"false"), `Literal[...]` and unions of
    them (`X | None` is `X`, its default None); then `check(value)`, which
    raises a `ValueError` for a value the type admits but the program
    does not."""
    members = typing.get_args(annotation) if isinstance(
        annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union else (
        annotation,)
    literals = [value for member in members if typing.get_origin(member) is typing.Literal
                for value in typing.get_args(member)]
    kinds = [member for member in members
             if member is not type(None) and typing.get_origin(member) is not typing.Literal]
    choices = ("one of " + ", ".join(literals) if len(literals) > 2
               else " or ".join(literals))
    allowed = " or ".join(([choices] if literals else []) + [KINDS[k] for k in kinds])

    def convert(text):
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

    def parse(text):
        value = convert(text)
        if check is not None:
            try:
                check(value)
            except ValueError as error:
                raise argparse.ArgumentTypeError(str(error)) from None
        return value

    return parse


# command -> (the module of its program, its config class, its function,
# its help line)
PROGRAMS = {
    "train": ("keras_transformer.training.train", "TrainConfig", "train",
              "train a translator (the paper's recipe)"),
    "prepare": ("keras_transformer.training.prepare", "PrepareConfig", "prepare",
                "tokenize a corpus once into sharded TFRecord files, for train"),
    "train-lm": ("keras_transformer.training.train_lm", "CausalLMConfig", "train_lm",
                 "train a causal language model (GPT)"),
    "pretrain-mlm": ("keras_transformer.training.pretrain_mlm", "MaskedLMConfig",
                     "pretrain_mlm",
                     "pretrain an encoder with masked language modelling (BERT)"),
    "finetune": ("keras_transformer.training.finetune", "FinetuneConfig", "finetune",
                 "train a classifier on labelled examples or translation pairs, "
                 "pretrained or from scratch"),
}


def _program(command):
    """`(config class, function, recipes)` of a training command: recipes
    are named sets of config values (`{}` if it has none)."""
    import importlib

    module, config, function, _ = PROGRAMS[command]
    module = importlib.import_module(module)
    return getattr(module, config), getattr(module, function), getattr(module, "RECIPES", {})


def _add_train_arguments(parser, command):
    # A flag left out is absent from the parsed arguments (SUPPRESS), so a
    # recipe's values give way to the flags given.
    from keras_transformer.training.options import field_help

    config_class, _, recipes = _program(command)
    annotations = typing.get_type_hints(config_class)
    for field in dataclasses.fields(config_class):
        flag = "--" + field.name.replace("_", "-")
        annotation = annotations[field.name]
        text = field_help(config_class, field.name)
        if annotation is bool:
            parser.add_argument(flag, action="store_true", default=argparse.SUPPRESS,
                                help=text)
            continue
        if field.default is not None and "(default:" not in text:
            text += f" (default: {field.default})"
        # A few choices name themselves in place of the metavar: {drop,truncate}.
        choices = (typing.get_args(annotation)
                   if typing.get_origin(annotation) is typing.Literal else ())
        parser.add_argument(flag, type=_value_parser(annotation, field.metadata.get("check")),
                            default=argparse.SUPPRESS, help=text,
                            metavar="{%s}" % ",".join(choices) if 1 < len(choices) <= 4
                            else None)
    if recipes:
        parser.add_argument("--recipe", choices=sorted(recipes), default=argparse.SUPPRESS,
                            help="start from a named set of settings; the flags given "
                                 "beside it win")


def _train(args):
    config_class, program, recipes = _program(args.command)
    names = {f.name for f in dataclasses.fields(config_class)}
    given = {k: v for k, v in vars(args).items() if k in names}
    config = config_class(**{**recipes.get(getattr(args, "recipe", None), {}), **given})
    try:
        program(config)
    except KeyboardInterrupt:
        if args.command == "prepare":
            print(f"\nInterrupted: {config.output_dir} is incomplete; delete it and "
                  "prepare again.", file=sys.stderr)
            return 130
        print(f"\nInterrupted. Checkpoints are in {config.run_dir}/checkpoints; "
              f"continue with: {PROG} {args.command} --run-dir {config.run_dir} "
              "--resume (and the same options).", file=sys.stderr)
        return 130
    return 0


def read_lines(stream):
    """The lines of a binary stream as text, one at a time: bytes that are
    not UTF-8 become U+FFFD (a bad line never costs its neighbours), and
    the line ending, LF or CRLF, is dropped."""
    for raw in stream:
        yield raw.decode("utf-8", errors="replace").rstrip("\r\n")


def batches(items, size):
    """Lists of `size` consecutive items (the last may be shorter)."""
    batch = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _translate(args):
    from keras_transformer.compilation_cache import enable_compilation_cache
    from keras_transformer.translator import Translator

    stream = open(args.input, "rb") if args.input else sys.stdin.buffer  # fails first
    enable_compilation_cache()  # the beam search's programs, from an earlier run
    # The run directory's saved settings (a tuned alpha), unless given here.
    overrides = {name: getattr(args, name) for name in ("beam_size", "alpha")
                 if getattr(args, name) is not None}
    output = sys.stdout.buffer
    with stream:
        translator = Translator.load(args.run_dir, batch_size=args.batch_size, **overrides)
        # A batch at a time, in order: constant memory, and the first lines
        # appear while the rest are read.
        for lines in batches(read_lines(stream), args.batch_size):
            for translation in translator.translate(lines):
                # Exactly one output line per input line, always.
                output.write(" ".join(translation.splitlines()).encode("utf-8") + b"\n")
            output.flush()
    return 0


def _generate(args):
    from keras_transformer.data.tokenizer import TOKENIZER_FILE, load_tokenizer
    from keras_transformer.model_files import load_model_file
    from keras_transformer.training.train_lm import continue_texts

    stream = open(args.input, "rb") if args.input else sys.stdin.buffer  # fails first
    with stream:
        model = load_model_file(os.path.join(args.run_dir, "model.keras"), compile=False)
        if not hasattr(model, "generate"):
            raise ValueError(f"{args.run_dir}/model.keras is a {type(model).__name__}, "
                             "not a language model from train-lm")
        tokenizer = load_tokenizer(os.path.join(args.run_dir, TOKENIZER_FILE))
        for lines in batches(read_lines(stream), args.batch_size):
            for text in continue_texts(model, tokenizer, lines, args.new_tokens,
                                       args.top_k, args.seed):
                sys.stdout.write(" ".join(text.splitlines()) + "\n")
            sys.stdout.flush()
    return 0


def _average(args):
    from keras_transformer.training.checkpoints import average_checkpoints, list_checkpoints

    if not os.path.isdir(args.checkpoint_dir):
        raise FileNotFoundError(f"{args.checkpoint_dir}: no such checkpoint directory")
    paths = [p for _, p in list_checkpoints(args.checkpoint_dir)][-args.last:]
    if not paths:
        raise ValueError(f"no ckpt-*.keras checkpoints in {args.checkpoint_dir}")
    average_checkpoints(paths).save(args.output)
    print(f"averaged {len(paths)} checkpoints into {args.output}")
    return 0


def _describe(error):
    """A user's error as one line: the message, or for a file the path and
    the system's reason."""
    if isinstance(error, OSError) and error.filename is not None and error.strerror:
        return f"{error.filename}: {error.strerror}"
    return " ".join(str(error).split())


def build_parser():
    from keras_transformer.checks import check_non_negative, check_positive_int

    def positive_int(name):
        return _value_parser(int, lambda value: check_positive_int(name, value))

    debug = Parser(add_help=False)
    debug.add_argument("--debug", action="store_true",
                       help="show the traceback of an error")
    parser = Parser(prog=PROG, description=__doc__, parents=[debug],
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for command, (*_, text) in PROGRAMS.items():
        _add_train_arguments(commands.add_parser(command, parents=[debug], help=text), command)
    translate = commands.add_parser("translate", parents=[debug],
                                    help="translate stdin or a file, a line at a time")
    translate.add_argument("run_dir", help="a directory with model.keras and tokenizer.model")
    translate.add_argument("--input", help="a file of sentences (default: stdin)")
    translate.add_argument("--beam-size", type=positive_int("beam_size"),
                           help="beams of the search (default: the run's, else 4)")
    translate.add_argument("--alpha", type=_value_parser(
        float, lambda value: check_non_negative("alpha", value)),
        help="the length penalty (default: the run's, else 0.6)")
    translate.add_argument("--batch-size", type=positive_int("batch_size"), default=64,
                           help="lines read and decoded together (default: %(default)s)")
    generate = commands.add_parser("generate", parents=[debug],
                                   help="continue each line of stdin or a file (train-lm runs)")
    generate.add_argument("run_dir", help="a directory with model.keras and tokenizer.model")
    generate.add_argument("--input", help="a file of prompts (default: stdin)")
    generate.add_argument("--new-tokens", type=positive_int("new_tokens"), default=32,
                          help="tokens added to each prompt (default: %(default)s)")
    generate.add_argument("--top-k", type=positive_int("top_k"), default=10,
                          help="sample among the k likeliest tokens (default: %(default)s)")
    generate.add_argument("--seed", type=int, default=0,
                          help="the sampler's seed (default: %(default)s)")
    generate.add_argument("--batch-size", type=positive_int("batch_size"), default=16,
                          help="lines read and continued together (default: %(default)s)")
    average = commands.add_parser("average", parents=[debug],
                                  help="average the last checkpoints")
    average.add_argument("checkpoint_dir", help="a run's checkpoints directory")
    average.add_argument("--last", type=positive_int("last"), default=5,
                         help="checkpoints averaged, the newest (default: %(default)s)")
    average.add_argument("-o", "--output", required=True,
                         help="the .keras file written: the newest checkpoint's model "
                              "with the mean weights")
    return parser


def _warning_line(message, category, filename, lineno, file=None, line=None):
    """A warning as one line, as errors are, without Python's source line."""
    print(f"{PROG}: warning: {' '.join(str(message).split())}", file=file or sys.stderr)


def main(argv=None):
    """Runs a command; a user's error (a bad value, a missing or damaged
    file) prints one line and returns 2, with its traceback only under
    `--debug`. Other exceptions are bugs and keep their traceback. A
    warning is one line too, except under `--debug`."""
    args = build_parser().parse_args(argv)
    from keras_transformer.training.runs import allow_tf32

    allow_tf32()
    handler = {"translate": _translate, "generate": _generate,
               "average": _average}.get(args.command, _train)
    with warnings.catch_warnings():  # restores `showwarning`
        if not args.debug:
            warnings.showwarning = _warning_line
        try:
            return handler(args)
        except (ValueError, OSError) as error:
            if args.debug:
                raise
            print(f"{PROG}: error: {_describe(error)}", file=sys.stderr)
            return 2


def run():
    """The `keras-transformer` program (and `python -m keras_transformer`):
    `main`, in a process whose memory settings it owns."""
    from keras_transformer.freed_memory import keep_freed_memory

    keep_freed_memory()  # before the first computation (see there)
    sys.exit(main())


if __name__ == "__main__":
    run()
