"""The special token ids, defined once.

The tokenizer is trained with them (`data.tokenizer`), a `Transformer`
carries them in its config (`pad_id`, `bos_id`, `eos_id`), and the searches,
the pipeline and the `Translator` read them from the model.
"""

PAD_ID = 0  # padding: hidden from attention, ignored by the loss
BOS_ID = 1  # begins every decoder input
EOS_ID = 2  # ends every source and every output
UNK_ID = 3  # a piece the vocabulary lacks

# The SentencePiece pieces at those ids.
PIECES = {PAD_ID: "<pad>", BOS_ID: "<s>", EOS_ID: "</s>", UNK_ID: "<unk>"}
