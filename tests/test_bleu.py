"""BLEU as sacrebleu reports it and as the paper did (tokenized, with
compounds split), checked on sentences whose n-gram counts are done by
hand."""

import pytest

from keras_transformer.bleu import detokenized_bleu, split_compounds, tokenized_bleu


@pytest.mark.parametrize("text, split", [
    ("well-known", "well ##AT##-##AT## known"),
    ("a-b-c", "a ##AT##-##AT## b-c"),  # the Perl one-liner's non-overlapping matches
    ("a - b", "a - b"),
    ("-a b-", "-a b-"),
    ("Hals-Nasen-Ohren-Arzt",
     "Hals ##AT##-##AT## Nasen ##AT##-##AT## Ohren ##AT##-##AT## Arzt"),
])
def test_compounds_split_as_tensor2tensor_does(text, split):
    assert split_compounds(text) == split


def test_tokenized_bleu_counts_the_split_compound_as_three_tokens():
    # "a-b c d" against "a-b c e", tokenized: a ##AT##-##AT## b c d / e.
    # Matches: 4/5 unigrams, 3/4 bigrams, 2/3 trigrams, 1/2 4-grams, no
    # brevity penalty.
    expected = 100 * (4 / 5 * 3 / 4 * 2 / 3 * 1 / 2) ** 0.25
    tokenized = tokenized_bleu(["a-b c d"], ["a-b c e"], "de")
    assert tokenized["score"] == pytest.approx(expected, rel=1e-9)
    assert "compounds split" in tokenized["method"]
    # sacrebleu's own tokenization keeps "a-b" whole: 2/3, 1/2, 0/1, ...
    detokenized = detokenized_bleu(["a-b c d"], ["a-b c e"])
    assert detokenized["score"] < expected - 10
    assert detokenized["signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a")


def test_tokenized_bleu_tokenizes_punctuation_as_moses():
    # "Ja, gut." -> "Ja , gut ." : a hypothesis without the comma matches
    # 3/3 unigrams, 1/2 bigrams ("gut ."), 0 trigrams: multi-bleu gives 0.
    assert tokenized_bleu(["Ja gut."], ["Ja, gut."], "de")["score"] == 0.0
    assert tokenized_bleu(["Ja, gut. Danke schön!"], ["Ja, gut. Danke schön!"],
                          "de")["score"] == pytest.approx(100.0)
