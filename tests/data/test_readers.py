import bz2
import gzip
import json
import lzma
import re

import pytest

from keras_transformer.data.readers import read_corpus, read_labelled, read_texts

PAIRS = [("Hello.", "Bonjour."), ("Thank you very much.", "Merci beaucoup.")]


def write(path, text, opener=open):
    with opener(path, "wt", encoding="utf-8") as f:
        f.write(text)
    return str(path)


@pytest.mark.parametrize("suffix, opener", [
    ("", open), (".gz", gzip.open), (".xz", lzma.open), (".bz2", bz2.open),
])
def test_tsv_any_compression(tmp_path, suffix, opener):
    text = "Hello.\tBonjour.\tCC-BY 2.0 (France) Attribution: tatoeba.org\n" \
           "Thank you very much.\tMerci beaucoup.\n"
    path = write(tmp_path / f"pairs.tsv{suffix}", text, opener)
    pairs, report = read_corpus(path)
    assert pairs == PAIRS
    assert (report.read, report.kept, report.dropped_empty) == (2, 2, 0)


def test_moses_prefix_and_explicit_pair(tmp_path):
    write(tmp_path / "train.en", "Hello.\nThank you very much.\n")
    write(tmp_path / "train.fr.gz", "Bonjour.\nMerci beaucoup.\n", gzip.open)
    assert read_corpus(str(tmp_path / "train"))[0] == PAIRS
    assert read_corpus(str(tmp_path / "train.en"), str(tmp_path / "train.fr.gz"))[0] == PAIRS


def test_jsonl_with_either_key_style(tmp_path):
    lines = [json.dumps({"source": "Hello.", "target": "Bonjour."}),
             json.dumps({"en": "Thank you very much.", "fr": "Merci beaucoup."})]
    path = write(tmp_path / "pairs.jsonl", "\n".join(lines) + "\n")
    assert read_corpus(path)[0] == PAIRS


def test_dropped_lines_are_counted(tmp_path):
    text = "Hello.\tBonjour.\n\t\n   \n" + "one two three four\tun deux trois quatre\n"
    pairs, report = read_corpus(write(tmp_path / "p.tsv", text), max_words=3)
    assert pairs == [("Hello.", "Bonjour.")]
    assert (report.read, report.kept, report.dropped_empty, report.dropped_too_long) == (4, 1, 2, 1)
    assert "2 dropped (empty side)" in str(report) and "1 dropped (too long)" in str(report)


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nothere"):
        read_corpus(str(tmp_path / "nothere.tsv"))
    with pytest.raises(FileNotFoundError, match="Moses pair"):
        read_corpus(str(tmp_path / "nothere"))


def test_invalid_utf8_names_file_and_line(tmp_path):
    path = tmp_path / "bad.tsv"
    path.write_bytes(b"Hello.\tBonjour.\nCaf\xe9\tCaf\xe9\n")
    with pytest.raises(ValueError, match=r"bad.tsv, line 2: invalid UTF-8"):
        read_corpus(str(path))


def test_line_counts_differ(tmp_path):
    write(tmp_path / "a.en", "one\ntwo\nthree\n")
    write(tmp_path / "a.fr", "un\ndeux\n")
    with pytest.raises(ValueError, match=r"a.en has 3 lines, .*a.fr has 2"):
        read_corpus(str(tmp_path / "a"))


def test_tsv_line_without_tab_and_bad_json(tmp_path):
    with pytest.raises(ValueError, match=r"p.tsv, line 2: expected 'source<TAB>target'"):
        read_corpus(write(tmp_path / "p.tsv", "a\tb\nno tab here\n"))
    with pytest.raises(ValueError, match=r"p.jsonl, line 1: invalid JSON"):
        read_corpus(write(tmp_path / "p.jsonl", "{oops\n"))
    with pytest.raises(ValueError, match=r"q.jsonl, line 1: expected an object"):
        read_corpus(write(tmp_path / "q.jsonl", '{"de": "x"}\n'))


def test_unknown_format(tmp_path):
    with pytest.raises(ValueError, match="Cannot tell the format"):
        read_corpus(write(tmp_path / "pairs.csv", "a,b\n"))


def test_tfds_dataset_prepared_locally(tmp_path, monkeypatch):
    import tensorflow_datasets as tfds

    pairs = [("one", "un"), ("two", "deux"), ("", "vide"), ("three", "trois")]

    class KtTinyPairs(tfds.core.GeneratorBasedBuilder):
        """A TFDS dataset built from local data only (nothing downloaded)."""

        VERSION = tfds.core.Version("1.0.0")

        def _info(self):
            features = tfds.features.FeaturesDict(
                {"en": tfds.features.Text(), "fr": tfds.features.Text()})
            return self.dataset_info_from_configs(features=features)

        def _split_generators(self, dl_manager):
            return {"train": self._generate_examples()}

        def _generate_examples(self):
            for i, (en, fr) in enumerate(pairs):
                yield i, {"en": en, "fr": fr}

    monkeypatch.setenv("TFDS_DATA_DIR", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="never downloads"):
        read_corpus("tfds:kt_tiny_pairs:train")
    KtTinyPairs(data_dir=str(tmp_path)).download_and_prepare()
    got, report = read_corpus("tfds:kt_tiny_pairs:train")
    assert sorted(got) == sorted(p for p in pairs if p[0])
    assert (report.read, report.kept, report.dropped_empty) == (4, 3, 1)


def test_unknown_tfds_name(tmp_path, monkeypatch):
    monkeypatch.setenv("TFDS_DATA_DIR", str(tmp_path))
    with pytest.raises(ValueError, match="no_such_dataset_kt"):
        read_corpus("tfds:no_such_dataset_kt")


def test_texts_one_a_line_with_empty_lines_counted(tmp_path):
    path = tmp_path / "books.txt.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write("Once upon a time.\r\n\n  \nThe end.  \n")
    texts, report = read_texts(str(path))
    assert texts == ["Once upon a time.", "The end."]
    assert (report.read, report.kept, report.dropped_empty) == (4, 2, 2)
    assert str(report).endswith(": 4 texts read, 2 kept, 2 dropped (empty), 0 dropped (too long)")


def test_labelled_sentences_and_pairs(tmp_path):
    path = write(tmp_path / "labels.tsv", "positive\tGreat film.\n\nnegative\t Dull. \n"
                                          "negative\t\n")
    examples, report = read_labelled(path)
    assert examples == [("positive", ("Great film.",)), ("negative", ("Dull.",))]
    assert (report.read, report.kept, report.dropped_empty) == (4, 2, 2)
    assert str(report).endswith(": 4 examples read, 2 kept, 2 dropped (empty), "
                                "0 dropped (too long)")
    path = write(tmp_path / "pairs.tsv.gz", "1\tHello.\tBonjour.\n0\tHello.\tMerci.\n",
                 gzip.open)
    assert read_labelled(path)[0] == [("1", ("Hello.", "Bonjour.")), ("0", ("Hello.", "Merci."))]


@pytest.mark.parametrize("text, message", [
    ("positive Great film.\n", "line 1: expected 'label<TAB>text' or "
                               "'label<TAB>text<TAB>text'; found 0 tab(s)"),
    ("a\tb\tc\td\n", "line 1: expected 'label<TAB>text' or 'label<TAB>text<TAB>text'; "
                     "found 3 tab(s)"),
    ("1\tHello.\tBonjour.\n0\tHello.\n", "line 2: expected 2 text(s) after the label, as on "
                                        "the first line; found 1 tab(s)"),
])
def test_labelled_lines_of_the_wrong_form_name_the_line(tmp_path, text, message):
    path = write(tmp_path / "labels.tsv", text)
    with pytest.raises(ValueError, match=re.escape(message)):
        read_labelled(path)
