"""The copy-and-reverse task: a toy translation that any working
Transformer learns in a minute on a CPU."""

import numpy as np

from keras_transformer.special_tokens import BOS_ID, EOS_ID, PAD_ID

FIRST_SYMBOL = max(PAD_ID, BOS_ID, EOS_ID) + 1  # no unknown token here


def copy_reverse_task(num_examples, seed=0, vocabulary_size=12, min_length=3,
                      max_length=7):
    """Random symbol strings and their reversals, ready for `model.fit`.

    Source: `min_length..max_length` symbols drawn from
    `FIRST_SYMBOL..vocabulary_size-1`. Target: the same symbols reversed,
    then eos. The ids below are the package's pad, bos and eos.

    Args:
        num_examples: int, pairs to generate.
        seed: int, the NumPy seed.
        vocabulary_size: int, symbols plus the three special ids.
        min_length, max_length: int, the source length range.

    Returns:
        `(inputs, targets)`: `inputs` a dict of int32 arrays
        `{"encoder_token_ids": (n, max_length), "decoder_token_ids":
        (n, max_length + 1)}` (the decoder input is the target shifted right
        behind bos) and `targets` int32 `(n, max_length + 1)`.
    """
    if vocabulary_size <= FIRST_SYMBOL:
        raise ValueError(
            f"`vocabulary_size` must exceed {FIRST_SYMBOL} (pad, bos, eos). "
            f"Received: vocabulary_size={vocabulary_size}"
        )
    if not 1 <= min_length <= max_length:
        raise ValueError(
            "Need 1 <= min_length <= max_length. Received: "
            f"min_length={min_length}, max_length={max_length}"
        )
    rng = np.random.default_rng(seed)
    width = max_length + 1
    encoder = np.full((num_examples, max_length), PAD_ID, "int32")
    decoder = np.full((num_examples, width), PAD_ID, "int32")
    targets = np.full((num_examples, width), PAD_ID, "int32")
    for i in range(num_examples):
        length = rng.integers(min_length, max_length + 1)
        symbols = rng.integers(FIRST_SYMBOL, vocabulary_size, size=length)
        encoder[i, :length] = symbols
        decoder[i, : length + 1] = np.concatenate([[BOS_ID], symbols[::-1]])
        targets[i, : length + 1] = np.concatenate([symbols[::-1], [EOS_ID]])
    return {"encoder_token_ids": encoder, "decoder_token_ids": decoder}, targets
