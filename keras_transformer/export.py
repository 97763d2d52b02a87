"""A `Translator` as one TensorFlow SavedModel: string in, string out.

The exported graph holds the SentencePiece model, the weights and the beam
search, so a server needs TensorFlow and TensorFlow Text only:

    import tensorflow as tf
    import tensorflow_text  # registers the SentencePiece ops
    translator = tf.saved_model.load("exported")
    translator.translate(tf.constant(["Hello."]))  # --> (1,) tf.string

It behaves as `Translator.translate`: empty or whitespace-only input gives
"", unknown characters become the unknown token, and a source longer than
`max_source_length` tokens is cut to it (silently: a graph cannot warn).
"""

import keras


def export_saved_model(translator, path):
    """Writes `translator` as a SavedModel at `path` (TensorFlow backend).

    The SavedModel has one endpoint, `translate(sentences)`: a `(batch,)`
    `tf.string` tensor to a `(batch,)` `tf.string` tensor, with the
    translator's beam size, alpha and length limits.

    Args:
        translator: a `keras_transformer.Translator`.
        path: the directory to write.
    """
    if keras.backend.backend() != "tensorflow":
        raise RuntimeError(
            "A SavedModel can only be exported with the TensorFlow backend "
            "(set KERAS_BACKEND=tensorflow before importing keras). Received: "
            f"backend={keras.backend.backend()!r}. Models saved as `.keras` "
            "on any backend load on TensorFlow."
        )
    import tensorflow as tf
    import tensorflow_text as tf_text

    model = translator.model
    pieces = tf_text.SentencepieceTokenizer(model=translator.tokenizer.proto)
    max_pieces = translator.max_source_length - 1  # room for eos

    def translate(sentences):
        # (batch,) string --> (batch, src_len) int32: pieces + eos, as `encode`
        ids = tf.cast(pieces.tokenize(sentences)[:, :max_pieces], "int32")
        eos = tf.fill([tf.shape(sentences)[0], 1], model.eos_id)
        ids = tf.concat([ids, eos], axis=1).to_tensor(model.pad_id)
        best, _ = translator.translate_ids(ids)  # (batch, max_steps)
        # --> ragged (batch, None): each row up to its eos
        before_eos = tf.cumsum(tf.cast(tf.equal(best, model.eos_id), "int32"), axis=1) == 0
        text = pieces.detokenize(tf.ragged.boolean_mask(best, before_eos))
        empty = tf.equal(tf.strings.strip(sentences), "")
        return tf.where(empty, tf.constant(""), text)

    archive = keras.export.ExportArchive()
    archive.track(model)
    archive.track(pieces)
    archive.add_endpoint(
        "translate", translate, input_signature=[tf.TensorSpec([None], tf.string)]
    )
    archive.write_out(path, verbose=False)
