"""A shared source-target subword vocabulary (paper section 5.1).

The paper encodes both languages with one vocabulary: byte-pair encoding
(about 37000 tokens) for EN-DE, word pieces (32000) for EN-FR. We train a
SentencePiece model, BPE or a unigram language model over pieces, on both
sides of the training split and use it through keras-hub's
`SentencePieceTokenizer`, which runs inside tf.data. The special ids are
the package's (`keras_transformer.special_tokens`), which the model carries.

Note: `tf.random.set_seed` (called by `keras.utils.set_random_seed`) drops
TensorFlow Text's SentencePiece resources, so set seeds before creating a
tokenizer, not after.
"""

import io
import os

import keras
import numpy as np

from keras_transformer.checks import check_choice
from keras_transformer.special_tokens import BOS_ID, EOS_ID, PAD_ID, PIECES, UNK_ID

TOKENIZER_FILE = "tokenizer.model"
# Pieces when a run names none: on the shipped corpus 4,000 scored higher
# than 2,000 in the 10-minute demo, and 8,000 was slower (docs/RESULTS.md).
DEFAULT_VOCABULARY_SIZE = 4000
SUBWORD_MODELS = ("bpe", "unigram")
# The model when a translation run names none. On the shipped English-French
# corpus a unigram model scored 1.0 and 0.8 BLEU more than BPE in the
# 10-minute demo on two seeds and 0.6 less on a third (docs/RESULTS.md).
DEFAULT_SUBWORD_MODEL = "bpe"


def train_tokenizer(texts, vocabulary_size, model_path, model_type=DEFAULT_SUBWORD_MODEL,
                    extra_pieces=()):
    """Trains a SentencePiece model on `texts` and saves it at `model_path`.

    Args:
        texts: an iterable of strings (both languages, for a shared
            vocabulary).
        vocabulary_size: int, the number of pieces, the four special ids
            included.
        model_path: where to write the `.model` file.
        model_type: "bpe" (byte-pair encoding, the paper's for EN-DE) or
            "unigram" (pieces chosen by a unigram language model, close to
            the word pieces of its EN-FR).
        extra_pieces: pieces kept whole, at the ids after the special
            ones (BERT's mask token: `("<mask>",)` gets id 4).

    Returns:
        A `keras_hub.tokenizers.SentencePieceTokenizer`.
    """
    import sentencepiece as spm

    if not isinstance(vocabulary_size, int) or vocabulary_size < 8:
        raise ValueError(
            "`vocabulary_size` must be an integer >= 8. "
            f"Received: vocabulary_size={vocabulary_size!r}"
        )
    check_choice("model_type", model_type, SUBWORD_MODELS)
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(texts),
        model_writer=model,
        vocab_size=vocabulary_size,
        model_type=model_type,
        pad_id=PAD_ID, bos_id=BOS_ID, eos_id=EOS_ID, unk_id=UNK_ID,
        user_defined_symbols=list(extra_pieces),
        character_coverage=1.0,
        hard_vocab_limit=False,  # a small corpus may support fewer pieces
        num_threads=os.cpu_count() or 1,
        minloglevel=2,
    )
    directory = os.path.dirname(os.path.abspath(model_path))
    os.makedirs(directory, exist_ok=True)
    with open(model_path, "wb") as f:
        f.write(model.getvalue())
    return load_tokenizer(model_path)


def token_ids(tokenizer, texts):
    """`texts` tokenized as a list of lists of int (the tokenizer returns
    a ragged tensor on TensorFlow, rows of arrays elsewhere)."""
    ids = tokenizer(list(texts))
    ids = ids.to_list() if hasattr(ids, "to_list") else ids
    return [[int(t) for t in row] for row in ids]


def load_tokenizer(model_path):
    """Loads a SentencePiece `.model` file as a keras-hub tokenizer."""
    import keras_hub

    if not os.path.isfile(model_path):
        raise FileNotFoundError(f"No tokenizer model at {model_path!r}")
    with open(model_path, "rb") as f:
        return keras_hub.tokenizers.SentencePieceTokenizer(proto=f.read())


def detokenize(tokenizer, rows):
    """Lists of ids --> a list of strings, in one tokenizer call (an empty
    row gives "")."""
    if not rows:
        return []
    texts = tokenizer.detokenize([list(row) or [PAD_ID] for row in rows])
    if not isinstance(texts, list):
        texts = np.atleast_1d(keras.ops.convert_to_numpy(texts)).tolist()
    return [
        (t.decode("utf-8") if isinstance(t, bytes) else str(t)) if row else ""
        for t, row in zip(texts, rows)
    ]


def check_tokenizer_ids(tokenizer, pad_id, bos_id, eos_id):
    """Raises a `ValueError` unless `tokenizer` has its padding, start and
    end pieces at the model's `pad_id`, `bos_id` and `eos_id`."""
    for name, value, piece in (("pad_id", pad_id, PIECES[PAD_ID]),
                               ("bos_id", bos_id, PIECES[BOS_ID]),
                               ("eos_id", eos_id, PIECES[EOS_ID])):
        found = str(tokenizer.id_to_token(value))
        if found != piece:
            raise ValueError(
                f"The tokenizer does not match the model: the model's "
                f"{name}={value} is {found!r} in the tokenizer, not {piece!r}."
            )
