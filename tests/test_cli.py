"""The command line against hostile input: one line on stderr and exit
status 2 for every error a user can cause, never a traceback, never a lost
line of output, nothing changed by a refused command. The table of cases
lives in docs/RESULTS.md and this module keeps it current."""

import dataclasses
import hashlib
import io
import json
import os
import re
import shutil
import sys
import tracemalloc
import typing
import zipfile

import pytest

from keras_transformer import cli
from keras_transformer.data.corpora import numbers_and_dates
from keras_transformer.data.tokenizer import load_tokenizer, train_tokenizer
from keras_transformer.models import Transformer
from keras_transformer.training import TrainConfig
from keras_transformer.training.options import field_help, option
from keras_transformer.translator import Translator

RESULTS = os.path.join(os.path.dirname(__file__), os.pardir, "docs", "RESULTS.md")
START, END = "<!-- hostile-inputs -->", "<!-- /hostile-inputs -->"


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """A directory with an untrained translator in `run/` (fast to decode:
    beam 1, 3 extra tokens) and damaged copies of its model."""
    root = tmp_path_factory.mktemp("cli")
    pairs = numbers_and_dates(size=300)
    train_tokenizer([s for p in pairs for s in p], 120, str(root / "tokenizer.model"))
    tokenizer = load_tokenizer(str(root / "tokenizer.model"))  # after any seeding
    model = Transformer.from_preset("tiny", vocabulary_size=int(tokenizer.vocabulary_size()),
                                    num_layers=1)
    Translator(model, tokenizer, beam_size=1, max_extra_length=3).save(str(root / "run"))
    model_file = root / "run" / "model.keras"
    for name, damage in DAMAGED.items():
        shutil.copytree(root / "run", root / name)
        damage(model_file, root / name / "model.keras")
    os.makedirs(root / "resume" / "checkpoints")
    shutil.copy(model_file, root / "resume" / "checkpoints" / "ckpt-0001.keras")
    _truncate(model_file, root / "resume" / "checkpoints" / "ckpt-0002.keras")
    # A run to resume with other settings, and one whose tokenizer is gone.
    for name in ("changed", "no_tokenizer"):
        shutil.copytree(root / "resume", root / name)
        shutil.copy(model_file, root / name / "checkpoints" / "ckpt-0002.keras")
        with open(root / name / "train_config.json", "w") as f:
            json.dump(dataclasses.asdict(TrainConfig(corpus="numbers", run_dir=name)), f)
    shutil.copy(root / "run" / "tokenizer.model", root / "changed" / "tokenizer.model")
    os.makedirs(root / "empty")
    (root / "random.tsv").write_bytes(bytes(range(256)) * 64)
    return root


def _truncate(source, path):
    path.write_bytes(source.read_bytes()[:5000])


def _foreign_zip(source, path):
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("readme.txt", "not a model")


def _foreign_model(source, path):
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("config.json", '{"module": "otherpackage.models", '
                         '"class_name": "Seq2Seq", "config": {}, "registered_name": '
                         '"otherpackage>Seq2Seq"}')
        archive.writestr("metadata.json", '{"keras_version": "3.15.1"}')


DAMAGED = {"truncated": _truncate, "foreign_zip": _foreign_zip, "foreign_model": _foreign_model}

# (what is tried, argv, stdin bytes)
CASES = [
    ("a line of invalid UTF-8 between two good ones",
     ["translate", "run"], b"twelve\n\xff\xfe bad \xc3\n three\n"),
    ("CRLF line endings", ["translate", "run"], b"twelve\r\nthree\r\n"),
    ("NUL, control and right-to-left characters, emoji",
     ["translate", "run"], "a\x00b\x07\n\u05e9\u05dc\u05d5\u05dd\n\U0001f600\u0301\n".encode()),
    ("a missing run directory", ["translate", "nowhere"], b""),
    ("a missing input file", ["translate", "run", "--input", "missing.txt"], None),
    ("`--beam-size 0`", ["translate", "run", "--beam-size", "0"], b""),
    ("`--alpha -1`", ["translate", "run", "--alpha", "-1"], b""),
    ("a truncated model.keras", ["translate", "truncated"], b"twelve\n"),
    ("a zip of something else as model.keras", ["translate", "foreign_zip"], b"twelve\n"),
    ("a .keras file of another package", ["translate", "foreign_model"], b"twelve\n"),
    ("`--preset nope`", ["train", "--preset", "nope"], None),
    ("`--distribution model:x`", ["train", "--distribution", "model:x"], None),
    ("`--jit-compile maybe`", ["train", "--jit-compile", "maybe"], None),
    ("a missing corpus file", ["train", "--corpus", "missing.tsv", "--run-dir", "new"], None),
    ("a corpus of random bytes", ["train", "--corpus", "random.tsv", "--run-dir", "new"], None),
    ("`--resume` whose newest checkpoint is truncated",
     ["train", "--corpus", "numbers", "--run-dir", "resume", "--resume"], None),
    ("`--resume` with another `--preset` than the run's",
     ["train", "--corpus", "numbers", "--run-dir", "changed", "--resume", "--preset", "tiny"],
     None),
    ("`--resume` of a run whose tokenizer.model is gone",
     ["train", "--corpus", "numbers", "--run-dir", "no_tokenizer", "--resume"], None),
    ("`train --beam-size 0` (the search runs after training)",
     ["train", "--beam-size", "0", "--run-dir", "new"], None),
    ("`train --max-minutes -1`", ["train", "--max-minutes", "-1", "--run-dir", "new"], None),
    ("`train-lm --tokens-per-batch 0`",
     ["train-lm", "--tokens-per-batch", "0", "--run-dir", "new"], None),
    ("`finetune --pretrained` of a translator's run",
     ["finetune", "--pretrained", "run", "--run-dir", "new"], None),
    ("`average --last 0`", ["average", "resume/checkpoints", "--last", "0", "-o", "a.keras"],
     None),
    ("`average` of a missing directory", ["average", "nowhere", "-o", "a.keras"], None),
    ("`average` of a directory without checkpoints", ["average", "empty", "-o", "a.keras"],
     None),
]


def _snapshot(root):
    """Every file under `root` with its content's hash."""
    found = {}
    for directory, _, files in os.walk(root):
        for name in files:
            path = os.path.join(directory, name)
            with open(path, "rb") as f:
                found[os.path.relpath(path, root)] = hashlib.sha256(f.read()).hexdigest()
    return found


def run_cli(argv, stdin, monkeypatch, capsys):
    """`keras-transformer ARGV < STDIN` in this process: `(status, stdout,
    stderr)`; argparse's exits count as a status."""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin or b"")))
    try:
        status = cli.main(argv)
    except SystemExit as stop:
        status = stop.code
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def _seen(status, out, err, stdin):
    """What the user sees, for the table."""
    if status == 0:
        lines_in, lines_out = len(stdin.splitlines()), len(out.splitlines())
        return f"{lines_out} lines out for {lines_in} lines in"
    return err.strip().replace("|", "\\|")


def hostile_table(root, monkeypatch, capsys):
    """Runs every case in `root`; asserts what must hold of each; returns
    the Markdown table."""
    monkeypatch.chdir(root)
    rows = ["| input | what the user sees | exit status |", "|---|---|---|"]
    for what, argv, stdin in CASES:
        before = _snapshot(root)
        status, out, err = run_cli(argv, stdin, monkeypatch, capsys)
        assert "Traceback" not in err, what
        if stdin and argv[0] == "translate" and status == 0:
            assert len(out.splitlines()) == len(stdin.splitlines()), what
        else:
            assert status == 2, (what, status, err)
            assert re.fullmatch(r"keras-transformer: error: [^\n]+\n", err), (what, err)
        assert _snapshot(root) == before, what  # nothing written or changed
        rows.append(f"| {what} | {_seen(status, out, err, stdin or b'')} | {status} |")
    return "\n".join(rows)


@pytest.mark.once
def test_hostile_inputs_and_the_results_table(workspace, monkeypatch, capsys):
    table = hostile_table(workspace, monkeypatch, capsys)
    with open(RESULTS, encoding="utf-8") as f:
        text = f.read()
    before, rest = text.split(START)
    current, after = rest.split(END)
    if os.environ.get("KERAS_TRANSFORMER_UPDATE_RESULTS"):
        with open(RESULTS, "w", encoding="utf-8") as f:
            f.write(f"{before}{START}\n{table}\n{END}{after}")
        current = table
    else:
        assert current.strip() == table, "docs/RESULTS.md is out of date: rerun this test with " \
            "KERAS_TRANSFORMER_UPDATE_RESULTS=1"


def test_every_error_is_one_line_on_this_backend(workspace, monkeypatch, capsys):
    hostile_table(workspace, monkeypatch, capsys)


def _numeric(annotation):
    """Whether a setting's type takes a number (`int`, `float | None`,
    `Literal["auto"] | float`, ...)."""
    return bool({int, float} & set(typing.get_args(annotation) or [annotation]))


@pytest.mark.parametrize("command", sorted(cli.PROGRAMS))
def test_every_numeric_setting_refuses_a_negative_value_before_any_work(
        command, tmp_path, monkeypatch, capsys):
    # The corpus is missing, so a setting left unchecked shows as that
    # error, the first the program would meet after its checks.
    monkeypatch.chdir(tmp_path)
    config_class = cli._program(command)[0]
    annotations = typing.get_type_hints(config_class)
    for field in dataclasses.fields(config_class):
        if field.name == "seed" or not _numeric(annotations[field.name]):
            continue
        flag = "--" + field.name.replace("_", "-")
        status, _, err = run_cli([command, flag, "-1", "--corpus", "missing.tsv"], None,
                                 monkeypatch, capsys)
        assert status == 2 and f"`{field.name}` must be" in err, (flag, err)
    assert os.listdir(tmp_path) == []


def _help_entries(command, monkeypatch, capsys):
    """`{flag or argument: its entry in --help}`, the name and its help on
    one line."""
    monkeypatch.setenv("COLUMNS", "1000")  # no wrapped lines
    status, out, _ = run_cli([command, "--help"], None, monkeypatch, capsys)
    assert status == 0
    entries = {}
    for line in out.split("arguments:" if "positional" in out else "options:",
                          1)[1].splitlines():
        if line.startswith("  ") and not line.startswith("   "):
            name = line.split()[0]
            entries[name] = line.strip()
        elif line.strip() and not line.endswith(":"):
            entries[name] += " " + line.strip()
    return entries


@pytest.mark.parametrize("command", ["translate", "generate", "average"])
def test_every_argument_of_the_other_commands_has_a_help_line(command, monkeypatch, capsys):
    entries = _help_entries(command, monkeypatch, capsys)
    assert "--debug" in entries and len(entries) >= 4
    for name, entry in entries.items():
        words = entry.replace(",", " ").split()
        described = [w for w in words if not w.startswith("-") and not w.isupper()]
        assert len(described) >= 2, entry


@pytest.mark.parametrize("command", sorted(cli.PROGRAMS))
def test_help_describes_every_flag_with_its_default(command, monkeypatch, capsys):
    config_class = cli._program(command)[0]
    lines = _help_entries(command, monkeypatch, capsys)
    for field in dataclasses.fields(config_class):
        line = lines["--" + field.name.replace("_", "-")]
        assert field_help(config_class, field.name) in line, line
        if field.default is not None and not isinstance(field.default, bool):
            assert line.endswith(")") and "(default: " in line, line
    if command == "train":
        assert re.search(r"--long-pairs \{drop,truncate\} +what happens to a pair longer",
                         lines["--long-pairs"])
        assert lines["--dropout-rate"].endswith(
            "0.05 from 15, 0.1 from 30; or a rate (default: auto)")


def test_a_field_without_a_help_line_is_refused_and_a_subclass_keeps_the_base_line():
    @dataclasses.dataclass
    class Base:
        size: int = option(3, "how many")
        bare: int = 0

    @dataclasses.dataclass
    class Derived(Base):
        size: int = 4

    assert field_help(Derived, "size") == "how many"
    with pytest.raises(ValueError, match=r"Base.bare has no help line"):
        field_help(Base, "bare")


@pytest.mark.parametrize("command", sorted(cli.PROGRAMS))
def test_every_choice_is_checked_for_python_callers_too(command, tmp_path, monkeypatch):
    # The command line refuses a value outside a `Literal`'s choices as it
    # parses; a program called from Python refuses it first thing.
    monkeypatch.chdir(tmp_path)
    config_class, program, _ = cli._program(command)
    annotations = typing.get_type_hints(config_class)
    for field in dataclasses.fields(config_class):
        if typing.get_origin(annotations[field.name]) is typing.Literal:
            config = config_class(corpus="missing.tsv", **{field.name: "nonsense"})
            with pytest.raises(ValueError, match=f"`{field.name}` must be one of .* "
                                                 f"Received: {field.name}='nonsense'"):
                program(config)
    assert os.listdir(tmp_path) == []


def test_a_masking_rate_of_zero_is_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    status, _, err = run_cli(["pretrain-mlm", "--mask-rate", "0", "--corpus", "missing.tsv"],
                             None, monkeypatch, capsys)
    assert status == 2 and "`mask_rate` must be in (0, 1). Received: mask_rate=0.0" in err, err


def test_a_warning_is_one_line(workspace, monkeypatch, capsys):
    monkeypatch.chdir(workspace)
    status, out, err = run_cli(["translate", "run"], b"twelve " * 2000 + b"\n",
                               monkeypatch, capsys)
    assert status == 0 and len(out.splitlines()) == 1
    assert re.fullmatch(r"keras-transformer: warning: A sentence of \d+ tokens is longer "
                        r"than max_source_length=\d+: [^\n]+\n", err), err


def test_debug_shows_the_traceback(workspace, monkeypatch, capsys):
    monkeypatch.chdir(workspace)
    with pytest.raises(FileNotFoundError, match="nowhere"):
        cli.main(["translate", "nowhere", "--debug"])


def test_resume_names_the_previous_good_checkpoint(workspace, monkeypatch, capsys):
    monkeypatch.chdir(workspace)
    status, _, err = run_cli(["train", "--corpus", "numbers", "--run-dir", "resume",
                              "--resume"], None, monkeypatch, capsys)
    assert status == 2
    assert "ckpt-0002.keras is not a .keras file: not a zip archive" in err
    assert "the previous good one is resume/checkpoints/ckpt-0001.keras" in err


def test_translate_streams_in_order(workspace, monkeypatch):
    """The first translations are written before the rest is read."""
    monkeypatch.chdir(workspace)
    sink = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(sink))
    sentences = ["one", "two", "three", "four", "five"]
    out_when_read = []

    class Stdin:  # yields the lines, noting how many were out at each
        buffer = None

        def __iter__(self):
            for sentence in sentences:
                out_when_read.append(sink.getvalue().count(b"\n"))
                yield sentence.encode() + b"\n"

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    stdin = Stdin()
    stdin.buffer = stdin
    monkeypatch.setattr(sys, "stdin", stdin)
    assert cli.main(["translate", "run", "--batch-size", "2"]) == 0
    assert out_when_read == [0, 0, 2, 2, 4]
    expected = Translator.load("run").translate(sentences)
    assert sink.getvalue().decode().splitlines() == expected


def test_translate_memory_does_not_grow_with_the_input(tmp_path, monkeypatch):
    """Peak Python memory of the command on 20,000 lines: above its peak on
    2,000 by less than a tenth of the 18,000 extra lines' size, where
    holding them would take more than all of it (the translator stubbed
    out: the command's own reading, batching and writing)."""

    class Echo:
        def translate(self, lines):
            return [line.upper() for line in lines]

    monkeypatch.setattr(Translator, "load", classmethod(lambda cls, *a, **k: Echo()))
    peaks, sizes = [], []
    for count in (100, 2_000, 20_000):  # the first warms up (imports, buffers)
        source = tmp_path / f"in{count}.txt"
        source.write_text("".join(f"sentence number {i} of the file\n" for i in range(count)))
        sizes.append(source.stat().st_size)
        with open(tmp_path / "out.txt", "w") as out:
            monkeypatch.setattr(sys, "stdout", out)
            tracemalloc.start()
            assert cli.main(["translate", "run", "--input", str(source)]) == 0
            peaks.append(tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()
        assert sum(1 for _ in open(tmp_path / "out.txt")) == count
    assert peaks[2] - peaks[1] < 0.1 * (sizes[2] - sizes[1]), peaks


def test_average_command_writes_the_mean(workspace, monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(workspace)
    good = tmp_path / "checkpoints"
    os.makedirs(good)
    for epoch in (1, 2):
        shutil.copy(workspace / "run" / "model.keras", good / f"ckpt-000{epoch}.keras")
    status, out, _ = run_cli(["average", str(good), "--last", "2", "-o",
                              str(tmp_path / "avg.keras")], None, monkeypatch, capsys)
    assert status == 0 and "averaged 2 checkpoints" in out
    assert (tmp_path / "avg.keras").exists()
