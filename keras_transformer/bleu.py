"""BLEU as papers report it.

sacrebleu's BLEU scores detokenized text with its own tokenization and
prints a signature that says how: the number to compare between systems.
The paper's 27.3 and 41.0, like tensor2tensor's, are "tokenized BLEU":
hypotheses and references tokenized by the Moses tokenizer, hyphenated
compounds split (`well-known` -> `well ##AT##-##AT## known`), then
multi-bleu's BLEU on those tokens. Tokenizing and splitting compounds
change the score, so one is never compared with the other.
"""

import re


def detokenized_bleu(hypotheses, references):
    """sacrebleu's corpus BLEU of `hypotheses` against `references` (one
    reference each); returns `{"score", "signature"}`."""
    import sacrebleu

    metric = sacrebleu.BLEU()
    score = metric.corpus_score(hypotheses, [references]).score
    return {"score": score, "signature": str(metric.get_signature())}


def split_compounds(text):
    """tensor2tensor's compound splitting: `a-b` -> `a ##AT##-##AT## b`,
    matches taken left to right without overlap, as its Perl one-liner."""
    return re.sub(r"(\S)-(\S)", r"\1 ##AT##-##AT## \2", text)


def tokenized_bleu(hypotheses, references, language):
    """The paper's tokenized BLEU: both sides Moses-tokenized for
    `language` (sacremoses, a port of the Moses tokenizer), compounds split,
    then BLEU on the tokens as multi-bleu computes it (case-sensitive, no
    smoothing); returns `{"score", "method"}`."""
    import sacrebleu
    from sacremoses import MosesTokenizer

    moses = MosesTokenizer(lang=language)

    def tokenized(texts):
        return [split_compounds(moses.tokenize(t, escape=False, return_str=True))
                for t in texts]

    metric = sacrebleu.BLEU(tokenize="none", smooth_method="none", force=True)
    score = metric.corpus_score(tokenized(hypotheses), [tokenized(references)]).score
    return {"score": score, "method": f"Moses tokenizer ({language}), compounds split "
                                      "(##AT##), multi-bleu on tokens"}
