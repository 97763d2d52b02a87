"""Dynamic masking for the masked LM: the rates, what is never masked, and
the loss over the masked positions only."""

import numpy as np
import pytest

from keras_transformer.data.masking import masked_lm_dataset

VOCABULARY, MASK = 1000, 4


def corpus(n=4000, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(5, VOCABULARY, size=rng.integers(1, 60)).tolist() for _ in range(n)]


def batches(dataset):
    return [(inputs["token_ids"].numpy(), inputs["mask_positions"].numpy(),
             labels.numpy(), weights.numpy()) for inputs, labels, weights in dataset]


def within(count, total, p, sd=3):
    """`count / total` within `sd` standard deviations of `p`."""
    return abs(count - p * total) <= sd * np.sqrt(total * p * (1 - p))


def test_rates_are_15_percent_and_80_10_10():
    chosen = eligible = masked = replaced = kept = 0
    for ids, positions, labels, weights in batches(
        masked_lm_dataset(corpus(), MASK, VOCABULARY, batch_size=64, max_length=64)
    ):
        real = weights > 0
        eligible += int((ids > 2).sum())  # the specials are never replaced
        chosen += int(real.sum())
        at = np.take_along_axis(ids, positions, axis=1)[real]
        masked += int((at == MASK).sum())
        kept += int((at == labels[real]).sum())
        replaced += int(((at != MASK) & (at != labels[real])).sum())
    assert eligible > 100_000
    assert within(chosen, eligible, 0.15), chosen / eligible
    assert within(masked, chosen, 0.8), masked / chosen
    # A random replacement equals the original 1 time in 995.
    assert within(replaced, chosen, 0.1 * (1 - 1 / 995)), replaced / chosen
    assert within(kept, chosen, 0.1 + 0.1 / 995), kept / chosen


def test_padding_and_special_tokens_are_never_chosen_or_replaced():
    rows = corpus(600)
    for ids, positions, labels, weights in batches(
        masked_lm_dataset(rows, MASK, VOCABULARY, batch_size=16, max_length=64)
    ):
        real = weights > 0
        assert (labels[real] > 4).all()  # originals are ordinary tokens
        assert (labels[~real] == 0).all() and (positions[~real] == 0).all()
        assert (ids[:, 0] == 1).all()  # bos kept
        lengths = (ids != 0).sum(1)  # padding only at the end, untouched
        assert all((row[n:] == 0).all() and row[n - 1] == 2 for row, n in zip(ids, lengths))
        assert ids.shape[1] in (16, 32, 64)  # the bucket boundaries


def test_the_same_seed_gives_the_same_batches():
    rows = corpus(300)
    first, again, other = (
        batches(masked_lm_dataset(rows, MASK, VOCABULARY, batch_size=32, seed=s))
        for s in (1, 1, 2)
    )
    for a, b in zip(first, again):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
    assert any(a[0].shape != b[0].shape or (a[0] != b[0]).any() for a, b in zip(first, other))


def test_the_autotuner_is_off():
    # Deleting an exhausted iterator waits for the autotuner's next wake-up
    # (seconds at the end of each validation pass and `fit`; test_pipeline).
    dataset = masked_lm_dataset(corpus(10), MASK, VOCABULARY)
    assert dataset.options().autotune.enabled is False


def test_the_loss_reads_the_masked_positions_only():
    import keras

    from keras_transformer import LabelSmoothedCrossEntropy, MaskedLM

    model = MaskedLM.from_preset("bert_tiny", vocabulary_size=VOCABULARY)
    inputs, labels, weights = next(iter(
        masked_lm_dataset(corpus(64), MASK, VOCABULARY, batch_size=8, max_length=64)
    ))
    logits = keras.ops.convert_to_numpy(model(inputs))
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    picked = np.take_along_axis(log_probs, labels.numpy()[..., None], -1)[..., 0]
    w = weights.numpy()
    expected = -(picked * w).sum() / w.sum()
    loss = LabelSmoothedCrossEntropy(epsilon=0.0)  # ignores label 0, the empty slots
    np.testing.assert_allclose(float(loss(labels.numpy(), logits)), expected, rtol=1e-5)
    weighted = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    np.testing.assert_allclose(
        float(weighted(labels.numpy(), logits, sample_weight=w)) * w.size / w.sum(),
        expected, rtol=1e-5,
    )


@pytest.mark.parametrize("kwargs, message", [
    (dict(mask_id=VOCABULARY), "mask_id"), (dict(max_length=2), "an integer >= 3"),
    (dict(rate=1.5), "rate"), (dict(batch_size=0), "batch_size"),
    (dict(rate=0.0), r"`rate` must be in \(0, 1\)"),  # no token to predict
])
def test_bad_arguments_are_refused(kwargs, message):
    arguments = {"rows": [[5, 6]], "mask_id": MASK, "vocabulary_size": VOCABULARY, **kwargs}
    with pytest.raises(ValueError, match=message):
        masked_lm_dataset(**arguments)


def test_a_tokenizer_with_a_mask_piece(tmp_path):
    from keras_transformer.data.corpora import bible_en_fr
    from keras_transformer.data.tokenizer import token_ids, train_tokenizer

    texts = [en for en, _ in bible_en_fr("valid")]
    tokenizer = train_tokenizer(texts, 300, str(tmp_path / "t.model"),
                                extra_pieces=("<mask>",))
    mask_id = tokenizer.token_to_id("<mask>")
    assert mask_id == 4  # right after the four special pieces
    assert token_ids(tokenizer, ["a <mask> b"])[0].count(mask_id) == 1
