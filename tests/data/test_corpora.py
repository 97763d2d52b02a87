"""The embedded Bible corpus: its splits and the cleaning that made it."""

import re

import pytest

from keras_transformer.data.corpora.make_bible_en_fr import clean_segond
from keras_transformer.data.corpora import bible_en_fr, numbers_and_dates


@pytest.mark.parametrize("segond, expected", [
    # A verse the Segond numbers differently (Psalm 7:15 in English).
    ("(7:16) Il ouvre une fosse, il la creuse,", "Il ouvre une fosse, il la creuse,"),
    # Two Segond verses in one English verse (1 Samuel 20:42): both kept.
    ("Va en paix! (20:43) David se leva, et s'en alla.", "Va en paix! David se leva, et s'en alla."),
    # A psalm's verse 1 with its superscription (Psalm 52:1): the English
    # verse is the last part only.
    ("(52:1) Au chef des chantres. Cantique de David. (52:2) A l'occasion du "
     "rapport de Doëg. (52:3) Pourquoi te glorifies-tu de ta méchanceté, tyran?",
     "Pourquoi te glorifies-tu de ta méchanceté, tyran?"),
    ("Au commencement, Dieu créa les cieux et la terre.",
     "Au commencement, Dieu créa les cieux et la terre."),
])
def test_segond_verse_numbers_and_superscriptions_are_dropped(segond, expected):
    assert clean_segond(segond) == expected


def test_splits_are_disjoint_short_and_clean():
    splits = {split: bible_en_fr(split) for split in ("train", "valid", "test")}
    assert [len(splits[s]) for s in ("train", "valid", "test")] == [16054, 1000, 1000]
    sources = [set(english for english, _ in pairs) for pairs in splits.values()]
    assert not (sources[0] & sources[1] or sources[0] & sources[2] or sources[1] & sources[2])
    for pairs in splits.values():
        for english, french in pairs:
            assert len(english.split()) <= 25 and french
            assert not re.search(r"\(\d+:\d+\)", french), french


@pytest.mark.parametrize("corpus", [bible_en_fr, numbers_and_dates])
def test_an_unknown_split_is_refused_by_name(corpus):
    with pytest.raises(ValueError, match="`split` must be one of 'train', 'valid', 'test'. "
                                         "Received: split='dev'"):
        corpus("dev")


def test_an_unknown_target_language_is_refused_by_name():
    with pytest.raises(ValueError, match="`target_language` must be one of 'fr', 'de'. "
                                         "Received: target_language='es'"):
        numbers_and_dates("valid", target_language="es")
