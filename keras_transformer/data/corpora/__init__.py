"""The corpora that ship inside the package: nothing is downloaded."""

import datetime
import os
import random
import zlib

from keras_transformer.checks import check_choice
from keras_transformer.data.readers import read_corpus

CORPORA_DIR = os.path.dirname(__file__)
SPLITS = ("train", "valid", "test")


def bible_en_fr(split="train"):
    """English (World English Bible) - French (Louis Segond 1910) verse pairs.

    About 16,000 training pairs and 1,000 each for validation and test, all
    of at most 25 English words, no English sentence in two splits (see
    `NOTICE` here).

    Returns:
        A list of `(english, french)` strings.
    """
    check_choice("split", split, SPLITS)
    pairs, _ = read_corpus(os.path.join(CORPORA_DIR, f"bible_en_fr.{split}.tsv.xz"))
    return pairs


def numbers_and_dates(split="train", target_language="fr", size=None, seed=0):
    """Generated number and date phrases, English to French or German.

    "three hundred and twelve" -> "trois cent douze";
    "March 5, 1994" -> "5 mars 1994". Fast to learn: for tests that check
    that training really learns. The splits are disjoint: each number or
    date belongs to one split, by a hash of its value.

    Args:
        split: "train" (default 20,000 pairs), "valid" or "test" (500).
        target_language: "fr" or "de".
        size: int, the number of pairs (default by split).
        seed: int, added to the split's own seed.

    Returns:
        A list of `(english, target)` strings.
    """
    from babel.dates import format_date
    from num2words import num2words

    check_choice("split", split, SPLITS)
    check_choice("target_language", target_language, ("fr", "de"))
    size = size or (20000 if split == "train" else 500)
    rng = random.Random(SPLITS.index(split) * 1_000_003 + seed)
    seen, pairs = set(), []
    start = datetime.date(1900, 1, 1).toordinal()
    end = datetime.date(2099, 12, 31).toordinal()
    while len(pairs) < size:
        if rng.random() < 0.5:
            number = rng.randint(0, 9999)
            key = ("n", number)
            english = num2words(number, lang="en")
            target = num2words(number, lang=target_language)
        else:
            date = datetime.date.fromordinal(rng.randint(start, end))
            key = ("d", date)
            english = format_date(date, format="long", locale="en")
            target = format_date(date, format="long", locale=target_language)
        bucket = zlib.crc32(repr(key).encode()) % 20
        owner = "test" if bucket == 0 else "valid" if bucket == 1 else "train"
        if owner == split and key not in seen:
            seen.add(key)
            pairs.append((english, target))
    return pairs


def shipped_splits(corpus, target_language="fr"):
    """`(train, valid, test)` pair lists of a shipped corpus, "bible" or
    "numbers" (to `target_language`); None for any other name."""
    if corpus == "bible":
        return tuple(bible_en_fr(split) for split in SPLITS)
    if corpus == "numbers":
        return tuple(numbers_and_dates(split, target_language) for split in SPLITS)
    return None


def held_out_count(corpus, total, what):
    """How many of a user's `total` items (`what`: "usable pairs", ...)
    are held out for each of validation and test: 5%, at most 1,000.
    Fails on fewer than 100."""
    if total < 100:
        raise ValueError(f"{corpus}: {total} {what}; at least 100 are needed.")
    return min(1000, total // 20)
