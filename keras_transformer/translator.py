"""String in, string out: tokenizer + model + beam search + detokenizer."""

import json
import os
import warnings

import numpy as np

from keras_transformer.data.tokenizer import (
    TOKENIZER_FILE,
    check_tokenizer_ids,
    detokenize,
    load_tokenizer,
    token_ids,
)
from keras_transformer.checks import check_non_negative, check_positive_int
from keras_transformer.decoding import beam_search
from keras_transformer.model_files import load_model_file

MODEL_FILE = "model.keras"
SETTINGS_FILE = "translator.json"  # the search settings, e.g. a tuned alpha


class Translator:
    """Translates sentences with a trained `Transformer` and its tokenizer.

    Sentences are tokenized, sorted by length and decoded in batches with
    the paper's beam search (beam 4, alpha 0.6, at most input length + 50
    output tokens). Sources are padded to a multiple of `length_multiple`
    so that the compiled search is reused across batches.

    The path of a sentence: `encode` (pieces + eos, as ids), then
    `translate_ids` (ids in, output ids and scores out; also what the
    SavedModel and the attention pictures call), then one batched
    detokenization.

    Input that would break a model never does: an empty or whitespace-only
    sentence translates to "" without running the model; characters the
    vocabulary lacks become the unknown token; a sentence longer than
    `max_source_length` tokens is truncated, with a warning.

    Args:
        model: a `Transformer`.
        tokenizer: its keras-hub `SentencePieceTokenizer`, with the model's
            special ids.
        beam_size, alpha: beam search settings (4 and 0.6 in the paper).
        max_extra_length: output tokens allowed beyond the input's length.
        batch_size: sentences decoded together.
        max_source_length: int, longest source in tokens (eos included).
            Default: `model.max_length`.
        length_multiple: int, sources are padded to a multiple of it.
    """

    def __init__(self, model, tokenizer, beam_size=4, alpha=0.6,
                 max_extra_length=50, batch_size=32, max_source_length=None,
                 length_multiple=8):
        check_tokenizer_ids(tokenizer, model.pad_id, model.bos_id, model.eos_id)
        check_non_negative("alpha", alpha)
        max_source_length = max_source_length or model.max_length
        counts = {"beam_size": beam_size, "max_extra_length": max_extra_length,
                  "batch_size": batch_size, "max_source_length": max_source_length,
                  "length_multiple": length_multiple}
        for name, value in counts.items():
            check_positive_int(name, value)
        self.model, self.tokenizer = model, tokenizer
        # The search settings (saved by `save`), then the batching.
        self.beam_size, self.alpha, self.max_extra_length = beam_size, alpha, max_extra_length
        self.batch_size, self.length_multiple = batch_size, length_multiple
        self.max_source_length = max_source_length

    def encode(self, sentences):
        """The source token ids the model sees: pieces + eos, truncated to
        `max_source_length` (with a warning); a list of lists of int."""
        sentences = list(sentences)
        encoded = []
        for sentence, tokens in zip(sentences, token_ids(self.tokenizer, sentences)):
            if len(tokens) + 1 > self.max_source_length:
                warnings.warn(
                    f"A sentence of {len(tokens) + 1} tokens is longer than "
                    f"max_source_length={self.max_source_length}: translating "
                    f"its first {self.max_source_length - 1} tokens only "
                    f"({sentence[:40]!r}...).",
                    stacklevel=3,
                )
                tokens = tokens[: self.max_source_length - 1]
            encoded.append(tokens + [self.model.eos_id])
        return encoded

    def translate_ids(self, encoder_token_ids):
        """Source ids in, output ids and scores out: the beam search with
        this translator's settings.

        Args:
            encoder_token_ids: int `(batch, src_len)`, each row pieces + eos
                padded with `model.pad_id` (see `encode`).

        Returns:
            `(tokens, scores)`: int32 `(batch, src_len + max_extra_length)`,
            the best hypothesis of each row (eos, then padding, after its
            end), and float32 `(batch,)` its penalised score. NumPy arrays,
            or tensors inside a traced function (the SavedModel).
        """
        tokens, scores = beam_search(
            self.model, encoder_token_ids, beam_size=self.beam_size,
            alpha=self.alpha, max_extra_length=self.max_extra_length,
        )
        return tokens[:, 0], scores[:, 0]

    def translate(self, sentences, progress=None):
        """Translates a list of strings; returns a list of strings.
        `progress`, a `keras_transformer.progress.Progress`, advances by the
        sentences of each batch done."""
        if isinstance(sentences, str):
            raise TypeError("`translate` takes a list of strings; wrap one sentence in a list.")
        sentences = [str(s) for s in sentences]
        outputs = [[] for _ in sentences]  # output ids, eos excluded
        todo = [i for i, s in enumerate(sentences) if s.strip()]
        encoded = self.encode([sentences[i] for i in todo]) if todo else []
        # Similar lengths together: less padding, fewer shapes to compile.
        order = sorted(range(len(todo)), key=lambda j: len(encoded[j]))
        for start in range(0, len(order), self.batch_size):
            chunk = order[start:start + self.batch_size]
            tokens, _ = self.translate_ids(self._pad([encoded[j] for j in chunk]))
            for row, j in zip(tokens, chunk):
                outputs[todo[j]] = self.until_eos(row)
            if progress is not None:
                progress.advance(len(chunk))
        return detokenize(self.tokenizer, outputs)

    def _pad(self, rows):
        """Rows of ids --> int32 `(len(rows), width)`, the width the longest
        row rounded up to `length_multiple`."""
        width = max(len(row) for row in rows)
        width = -(-width // self.length_multiple) * self.length_multiple
        batch = np.full((len(rows), width), self.model.pad_id, "int32")
        for i, row in enumerate(rows):
            batch[i, : len(row)] = row
        return batch

    def until_eos(self, tokens):
        """One row of `translate_ids` as a list of ids, without eos and what
        follows it."""
        tokens = [int(t) for t in tokens]
        eos = self.model.eos_id
        return tokens[: tokens.index(eos)] if eos in tokens else tokens

    def settings(self):
        """The search settings `save` writes and `load` restores."""
        return {"beam_size": self.beam_size, "alpha": self.alpha,
                "max_extra_length": self.max_extra_length}

    def save(self, directory):
        """Writes `model.keras`, `tokenizer.model` and the search settings
        (`translator.json`) into `directory`."""
        os.makedirs(directory, exist_ok=True)
        self.model.save(os.path.join(directory, MODEL_FILE))
        with open(os.path.join(directory, TOKENIZER_FILE), "wb") as f:
            f.write(self.tokenizer.proto)
        with open(os.path.join(directory, SETTINGS_FILE), "w") as f:
            json.dump(self.settings(), f, indent=2)

    def export_saved_model(self, path):
        """Exports this translator, string in and string out, as a TensorFlow
        SavedModel (TensorFlow backend); see `keras_transformer.export`."""
        from keras_transformer.export import export_saved_model

        export_saved_model(self, path)

    @classmethod
    def load(cls, directory, **kwargs):
        """Loads what `save` wrote (or a training run directory), with the
        saved search settings unless `kwargs` (the constructor's) override
        them."""
        if not os.path.isdir(directory):
            raise FileNotFoundError(f"{directory}: no such run directory")
        model_path = os.path.join(directory, MODEL_FILE)
        if not os.path.isfile(model_path):
            raise FileNotFoundError(f"No {MODEL_FILE} in {directory!r}")
        model = load_model_file(model_path, compile=False)
        tokenizer = load_tokenizer(os.path.join(directory, TOKENIZER_FILE))
        settings_path = os.path.join(directory, SETTINGS_FILE)
        settings = {}
        if os.path.isfile(settings_path):  # absent in directories saved before it
            with open(settings_path) as f:
                settings = json.load(f)
        return cls(model, tokenizer, **{**settings, **kwargs})
