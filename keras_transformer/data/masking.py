"""Batches for masked language modelling (BERT's pretraining), in tf.data.

Every batch is masked afresh as it is drawn ("dynamic masking"): each real
token (not padding, not the start or end token) is chosen with probability
`rate` (15%); a chosen token becomes the mask token 80% of the time, a
random ordinary token 10%, and stays itself 10%; the model predicts the
originals at the chosen positions.

keras-hub's `MaskedLMMaskGenerator` (tensorflow-text's masking ops) is
not used, for two reasons. Its random replacements are drawn from the
whole vocabulary, special ids included: a drawn padding id hides that
position from attention, a drawn end token fakes a sentence boundary.
And it takes no seed: its masks follow TensorFlow's global seed and the
order its ops are created in. Here a batch's masks are a function of the
pipeline's seed, the epoch and the batch's place in it, so a run, or a
resumed run, can draw them again. Each token is chosen independently,
as in RoBERTa's dynamic masking.
"""

import math

from keras_transformer.checks import check_max_length, check_positive_int, check_rate
from keras_transformer.data.pipeline import (
    doubling_boundaries,
    pad_to_bucket,
    planned_batches,
    ragged_rows,
)
from keras_transformer.special_tokens import BOS_ID, EOS_ID, PAD_ID, PIECES

# Token ids below this are the special pieces; the rest are ordinary.
FIRST_ORDINARY_ID = len(PIECES)


def max_predictions(max_length, rate):
    """Prediction slots per row: the expected count plus 5 standard
    deviations, so that a row has more chosen tokens with probability
    below 3e-7 (those extra ones are left unmasked)."""
    mean = rate * max_length
    return min(max_length, math.ceil(mean + 5 * math.sqrt(mean * (1 - rate))) + 1)


def mask_batch(token_ids, seed, mask_id, vocabulary_size, rate=0.15, mask_rate=0.8,
               random_rate=0.1, num_predictions=None):
    """Masks one padded batch (a TensorFlow function, for `Dataset.map`).

    Args:
        token_ids: int32 `(batch, len)`, padded with `PAD_ID`.
        seed: int32 or int64 `(2,)`, the stateless random seed of this batch.
        mask_id: int, the mask token's id.
        vocabulary_size: int, random replacements are drawn from
            `[FIRST_ORDINARY_ID, vocabulary_size)`.
        rate, mask_rate, random_rate: the chosen fraction, and of the chosen
            the fractions masked and replaced (the rest are kept).
        num_predictions: int, prediction slots per row. Default
            `max_predictions(len, rate)`.

    Returns:
        `(token_ids, mask_positions, mask_ids, mask_weights)`: the masked
        ids `(batch, len)`, and `(batch, min(num_predictions, len))` positions,
        original ids and weights (1 for a chosen token, 0 for an empty
        slot, whose position and id are 0).
    """
    import tensorflow as tf

    batch, length = tf.shape(token_ids)[0], tf.shape(token_ids)[1]
    slots = num_predictions or max_predictions(int(token_ids.shape[1]), rate)
    seeds = tf.random.experimental.stateless_split(seed, 3)
    eligible = (token_ids != PAD_ID) & (token_ids != BOS_ID) & (token_ids != EOS_ID)
    chosen = eligible & (tf.random.stateless_uniform((batch, length), seeds[0]) < rate)
    # The chosen positions first, in order: (batch, slots).
    positions = tf.range(length)[None, :]
    order = tf.argsort(tf.where(chosen, positions, length + positions), axis=1)
    mask_positions = order[:, :slots]  # fewer when the batch is shorter
    mask_weights = tf.cast(tf.gather(chosen, mask_positions, batch_dims=1), tf.float32)
    mask_positions = tf.where(mask_weights > 0, mask_positions, 0)
    mask_ids = tf.where(mask_weights > 0, tf.gather(token_ids, mask_positions, batch_dims=1), 0)
    # The chosen positions that got a slot, as (batch, len) flags; what each
    # becomes.
    in_slot = tf.scatter_nd(
        tf.stack([tf.repeat(tf.range(batch), tf.shape(mask_positions)[1]),
                  tf.reshape(mask_positions, [-1])], 1),
        tf.reshape(mask_weights > 0, [-1]), (batch, length),
    )
    draw = tf.random.stateless_uniform((batch, length), seeds[1])
    random_ids = tf.random.stateless_uniform(
        (batch, length), seeds[2], FIRST_ORDINARY_ID, vocabulary_size, tf.int32
    )
    replaced = tf.where(draw < mask_rate, mask_id,
                        tf.where(draw < mask_rate + random_rate, random_ids, token_ids))
    token_ids = tf.where(in_slot, replaced, token_ids)
    return token_ids, mask_positions, mask_ids, mask_weights


def masked_lm_dataset(rows, mask_id, vocabulary_size, batch_size=32, max_length=128,
                      rate=0.15, seed=0, shuffle=True, first_epoch=None):
    """A `tf.data.Dataset` of masked batches for `MaskedLM.fit`.

    Args:
        rows: lists of token ids, one sentence each (no start or end
            token); each becomes `[bos] ids [eos]`, truncated to
            `max_length`, with segment ids 0.
        mask_id: int, the mask token's id (`tokenizer.token_to_id("<mask>")`).
        vocabulary_size: int.
        batch_size: int, rows per batch; rows of similar length are
            batched together and padded to 16, 32, 64, ... tokens
            (`doubling_boundaries`), one shape per bucket.
        max_length: int.
        rate: float in (0, 1), the fraction of tokens to predict.
        seed: int, the shuffle and masking seed: the same seed gives the
            same batches.
        shuffle: bool.
        first_epoch: None for one epoch, or the epoch an endless stream
            of epochs starts at (`planned_batches`), each epoch's rows and
            masks a function of `seed` and its number alone.

    Returns:
        A dataset of `(inputs, mask_ids, mask_weights)`, `inputs` being
        `{"token_ids", "segment_ids", "mask_positions"}`.
    """
    import tensorflow as tf

    check_positive_int("batch_size", batch_size)
    check_max_length(max_length)
    check_rate("rate", rate, zero=False)
    if not 0 <= mask_id < vocabulary_size:
        raise ValueError(
            f"`mask_id` must be in [0, {vocabulary_size}). Received: mask_id={mask_id}"
        )
    rows = [[BOS_ID] + list(r)[: max_length - 2] + [EOS_ID] for r in rows]
    if not rows:
        raise ValueError("`rows` is empty: there is nothing to train on.")
    table = ragged_rows(rows)
    boundaries = doubling_boundaries(max_length)
    slots = max_predictions(max_length, rate)

    def batch(indices, batch_seed):
        token_ids = pad_to_bucket(tf.gather(table, indices).to_tensor(), boundaries)
        ids, positions, labels, weights = mask_batch(
            token_ids, batch_seed, mask_id, vocabulary_size, rate=rate, num_predictions=slots)
        padding = [[0, 0], [0, slots - tf.shape(positions)[1]]]
        inputs = {"token_ids": ids, "segment_ids": tf.zeros_like(ids),
                  "mask_positions": tf.pad(positions, padding)}
        return inputs, tf.pad(labels, padding), tf.pad(weights, padding)

    return planned_batches(table.row_lengths(), tf.range(table.nrows()), boundaries,
                           [batch_size] * len(boundaries), batch, shuffle, seed, first_epoch)
