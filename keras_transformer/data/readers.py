"""Reading a parallel corpus, or a monolingual one, from a user's files.

Formats:
- TSV: `source<TAB>target[<TAB>anything]` a line (Tatoeba / Anki exports).
- Moses: two line-aligned files, `prefix.<src>` and `prefix.<tgt>`.
- JSONL: one object a line, with keys `source`/`target` or the two
  language codes (`{"en": ..., "fr": ...}`).
- Text (for the language models, `read_texts`): one text a line.
- Labelled (for `finetune`, `read_labelled`): `label<TAB>text` or
  `label<TAB>text<TAB>second text` a line.
- TensorFlow Datasets: `tfds:NAME[/CONFIG][:SPLIT]`, only if already in the
  local TFDS data directory (nothing is ever downloaded).

Files ending in `.gz`, `.xz` or `.bz2` are decompressed transparently.
Every problem raises an error naming the file and the line. Pairs dropped for
an empty side or for being too long are counted in the returned
`CorpusReport`, never dropped silently.
"""

import bz2
import dataclasses
import gzip
import itertools
import json
import lzma
import os

_OPENERS = {".gz": gzip.open, ".xz": lzma.open, ".bz2": bz2.open}


@dataclasses.dataclass
class CorpusReport:
    """What a reader kept and dropped, for the user to see."""

    path: str
    read: int = 0
    kept: int = 0
    dropped_empty: int = 0
    dropped_too_long: int = 0
    unit: str = "pairs"  # what a line holds: pairs, texts or examples

    def __str__(self):
        empty = "empty side" if self.unit == "pairs" else "empty"
        return (
            f"{self.path}: {self.read} {self.unit} read, {self.kept} kept, "
            f"{self.dropped_empty} dropped ({empty}), "
            f"{self.dropped_too_long} dropped (too long)"
        )


def _strip_compression(path):
    root, ext = os.path.splitext(path)
    return (root, ext) if ext in _OPENERS else (path, "")


def read_lines(path):
    """Yields `(line_number, text)` of a UTF-8 text file, decompressing
    `.gz`, `.xz` and `.bz2`, with line endings removed."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"No such corpus file: {path!r}")
    opener = _OPENERS.get(_strip_compression(path)[1], open)
    with opener(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise ValueError(
                    f"{path}, line {number}: invalid UTF-8 ({error.reason} at "
                    f"byte {error.start}). Convert the file to UTF-8."
                ) from None
            yield number, text.rstrip("\r\n")


def read_texts(path):
    """The non-empty lines of a text file, one text each (a monolingual
    corpus for a language model), stripped of surrounding whitespace.

    Returns:
        `(texts, report)`: a list of strings and a `CorpusReport` counting
        the empty lines dropped.
    """
    report = CorpusReport(path, unit="texts")
    texts = []
    for _, line in read_lines(path):
        report.read += 1
        if line.strip():
            texts.append(line.strip())
        else:
            report.dropped_empty += 1
    report.kept = len(texts)
    return texts, report


def read_labelled(path):
    """Labelled examples for a classifier: `label<TAB>text` (one sentence)
    or `label<TAB>text<TAB>second text` (a pair) a line, every line the
    same form; a label is any string.

    Returns:
        `(examples, report)`: a list of `(label, texts)` with `texts` a
        tuple of one or two strings, and a `CorpusReport` counting the
        lines dropped for an empty field.
    """
    report = CorpusReport(path, unit="examples")
    examples, width = [], None
    for number, line in read_lines(path):
        report.read += 1
        fields = [field.strip() for field in line.split("\t")]
        if not line.strip():
            report.dropped_empty += 1
            continue
        if len(fields) not in (2, 3) or (width and len(fields) != width):
            expected = ("'label<TAB>text' or 'label<TAB>text<TAB>text'" if width is None
                        else f"{width - 1} text(s) after the label, as on the first line")
            raise ValueError(
                f"{path}, line {number}: expected {expected}; found {len(fields) - 1} "
                f"tab(s) in {line[:60]!r}")
        width = len(fields)
        if all(fields):
            examples.append((fields[0], tuple(fields[1:])))
        else:
            report.dropped_empty += 1
    report.kept = len(examples)
    return examples, report


def _tsv_pairs(path):
    for number, line in read_lines(path):
        if not line.strip():
            yield number, "", ""
            continue
        fields = line.split("\t")
        if len(fields) < 2:
            raise ValueError(
                f"{path}, line {number}: expected 'source<TAB>target', found "
                f"no tab in {line[:60]!r}"
            )
        yield number, fields[0], fields[1]


def _jsonl_pairs(path, source_language, target_language):
    for number, line in read_lines(path):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}, line {number}: invalid JSON ({error.msg})") from None
        for source_key, target_key in (
            ("source", "target"), (source_language, target_language)
        ):
            if isinstance(record, dict) and source_key in record and target_key in record:
                yield number, str(record[source_key]), str(record[target_key])
                break
        else:
            raise ValueError(
                f"{path}, line {number}: expected an object with keys "
                f"'source' and 'target' (or {source_language!r} and "
                f"{target_language!r}); found {line[:60]!r}"
            )


def _moses_pairs(source_path, target_path):
    # Both files are read a line at a time: memory does not grow with them.
    lines = {source_path: 0, target_path: 0}
    for source, target in itertools.zip_longest(read_lines(source_path),
                                                read_lines(target_path)):
        for path, line in ((source_path, source), (target_path, target)):
            lines[path] += line is not None
        if source is None or target is None:
            continue  # counting the longer file's lines
        yield source[0], source[1], target[1]
    if lines[source_path] != lines[target_path]:
        raise ValueError(
            f"Line-aligned files differ in length: {source_path} has "
            f"{lines[source_path]} lines, {target_path} has {lines[target_path]}.")


def _tfds_pairs(spec, source_language, target_language):
    """`tfds:NAME[/CONFIG][:SPLIT]` from the local TFDS data directory."""
    try:
        import tensorflow_datasets as tfds
    except ImportError:
        raise ImportError(
            f"Reading {spec!r} needs the tensorflow-datasets package: "
            "pip install tensorflow-datasets"
        ) from None

    name, _, split = spec[len("tfds:"):].partition(":")
    split = split or "train"
    try:
        builder = tfds.builder(name, data_dir=os.environ.get("TFDS_DATA_DIR"))
    except Exception as error:  # noqa: BLE001 - TFDS raises many kinds here
        raise ValueError(f"Unknown TensorFlow Datasets name {name!r}: {error}") from None
    if not builder.is_prepared():
        raise FileNotFoundError(
            f"TensorFlow Datasets {name!r} is not prepared in {builder.data_dir!r}, "
            "and keras_transformer never downloads data. Prepare it first "
            "(tfds build, or tfds.load on a machine with internet) or pass "
            "TFDS_DATA_DIR."
        )
    dataset = builder.as_dataset(split=split)
    for number, example in enumerate(tfds.as_numpy(dataset), start=1):
        yield (number, example[source_language].decode("utf-8"),
               example[target_language].decode("utf-8"))


def read_corpus(path, target_path=None, source_language="en",
                target_language="fr", max_words=None):
    """Reads sentence pairs from a user's corpus.

    Args:
        path: a `.tsv` or `.jsonl` file (optionally compressed), a Moses
            prefix (reads `path.<source_language>` and
            `path.<target_language>`), a source file with `target_path`, or
            `tfds:NAME[/CONFIG][:SPLIT]`.
        target_path: the target file of a Moses pair, if not from a prefix.
        source_language, target_language: codes used for Moses suffixes,
            JSONL keys and TFDS features.
        max_words: int or None, drop pairs with more whitespace-separated
            words on either side.

    Returns:
        `(pairs, report)`: a list of `(source, target)` strings and a
        `CorpusReport`.
    """
    report = CorpusReport(path)
    pairs = list(iter_corpus(path, target_path, source_language, target_language,
                             max_words, report))
    return pairs, report


def iter_corpus(path, target_path=None, source_language="en", target_language="fr",
                max_words=None, report=None):
    """`read_corpus`'s pairs one at a time, for corpora larger than memory;
    `report` (a `CorpusReport`) counts them as they pass. A path of no
    known format fails here, before the first pair."""
    rows = _rows(path, target_path, source_language, target_language)
    report = report if report is not None else CorpusReport(path)

    def pairs():
        for _, source, target in rows:
            report.read += 1
            source, target = source.strip(), target.strip()
            if not source or not target:
                report.dropped_empty += 1
            elif max_words and max(len(source.split()), len(target.split())) > max_words:
                report.dropped_too_long += 1
            else:
                report.kept += 1
                yield source, target

    return pairs()


def _rows(path, target_path, source_language, target_language):
    """`(line_number, source, target)` rows of a corpus, by its format."""
    if path.startswith("tfds:"):
        return _tfds_pairs(path, source_language, target_language)
    if target_path is not None:
        return _moses_pairs(path, target_path)
    root = _strip_compression(path)[0]
    extension = os.path.splitext(root)[1].lower()
    if extension in (".tsv", ".txt"):
        return _tsv_pairs(path)
    if extension in (".jsonl", ".json"):
        return _jsonl_pairs(path, source_language, target_language)
    if not os.path.exists(path):
        return _moses_pairs(_find(path, source_language), _find(path, target_language))
    raise ValueError(
        f"Cannot tell the format of {path!r}: use a .tsv, .txt or "
        ".jsonl name (optionally .gz/.xz/.bz2), a Moses prefix, or "
        "tfds:NAME."
    )


def _find(prefix, language):
    """`prefix.language`, compressed or not."""
    for suffix in ("", ".gz", ".xz", ".bz2"):
        candidate = f"{prefix}.{language}{suffix}"
        if os.path.isfile(candidate):
            return candidate
    raise FileNotFoundError(
        f"No such corpus file: {prefix!r}, nor a Moses pair "
        f"{prefix}.{language}[.gz|.xz|.bz2]"
    )
